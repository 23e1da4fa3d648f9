package tokens

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// bpeCorpus is text of every kind the pre-tokenizers split differently: contractions, numbers,
// punctuation, runs of white space and newlines, code, JSON, scripts other than Latin, emoji,
// long words BPE merges at length, and invalid UTF-8.
func bpeCorpus() []string {
	texts := []string{
		"", " ", "a", "tiktoken is great!", "Hello, world! I'm here; they're there, we'll see.",
		"The year 2024 had 366 days; 1234567890 and 3.14159 and -42.",
		"  leading and trailing  \n\n\t\r\n  ", "line one\nline two\r\nline three\n\n\n",
		"func main() {\n\tfmt.Println(\"hi\") // comment\n}\n", `{"path": "/a/b", "n": [1, 2, 3], "ok": true}`,
		"Ünïcödé façade naïve coöperate", "日本語のテキストと中文文本", "Привет, мир! Как дела?",
		"مرحبا بالعالم", "emoji 😀🎉👍🏽 and flags 🇫🇷", "supercalifragilisticexpialidocious antidisestablishmentarianism",
		"URLs like https://example.com/path?query=1&x=y#frag and emails a.b@c.io",
		"ALLCAPS CamelCaseWords snake_case_words kebab-case-words", "'S 'T 'RE 'VE 'M 'LL 'D",
		"bad \xff\xfe bytes \xc3 here", strings.Repeat("x", 300), strings.Repeat("ab ", 200),
		strings.Repeat("\n", 50) + "end", "tabs\t\t\tand    spaces     mixed \t \t",
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789 \n\t.,;:'\"!?-_/()[]{}éüßøæ日本中文😀\xff")
	for range 200 {
		n := 1 + r.IntN(120)
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	return texts
}

// TestBPECountsAsTiktoken: bpe counts every text of the corpus as tiktoken-go's ordinary
// encoding does, for both encodings.
func TestBPECountsAsTiktoken(t *testing.T) {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	for _, c := range encodings {
		want, err := tiktoken.GetEncoding(c.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := loadVocabulary(c.name, c.piece)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range bpeCorpus() {
			if g, w := got.count(text), int64(len(want.EncodeOrdinary(text))); g != w {
				t.Errorf("%s: %q counts %d tokens, tiktoken-go %d", c.name, text, g, w)
			}
		}
	}
}

// TestBPEHoldsNoPointers: the vocabulary a BPE counter keeps is maps without pointers, which
// the garbage collector does not scan: after loading o200k_base, the heap holds few more
// objects than before (tiktoken-go's tables were some 600,000).
func TestBPEHoldsNoPointers(t *testing.T) {
	objects := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapObjects
	}
	before := objects()
	b, err := loadVocabulary(EncodingO200K, o200kPiece)
	if err != nil {
		t.Fatal(err)
	}
	held := int64(objects()) - int64(before)
	if held > 10_000 {
		t.Errorf("the loaded vocabulary holds %d objects", held)
	}
	t.Logf("o200k_base holds %d objects", held)
	runtime.KeepAlive(b)
}

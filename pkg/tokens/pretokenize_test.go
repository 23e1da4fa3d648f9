package tokens

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
)

// The pre-tokenizer patterns of the BPE encodings, OpenAI's, as tiktoken and tiktoken-go have
// them: the oracle that cl100kPiece and o200kPiece are compared with.
const (
	patternCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|` +
		` ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	patternO200K = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` +
		`(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` +
		`(?i:'s|'t|'re|'ve|'m|'ll|'d)?` +
		`|\p{N}{1,3}` +
		`| ?[^\s\p{L}\p{N}]+[\r\n/]*` +
		`|\s*[\r\n]+` +
		`|\s+(?!\S)` +
		`|\s+`
)

// encodings are the BPE encodings with their pre-tokenizers and patterns.
var encodings = []struct {
	name    string
	piece   func(string) int
	pattern *regexp2.Regexp
}{
	{EncodingCL100K, cl100kPiece, regexp2.MustCompile(patternCL100K, regexp2.None)},
	{EncodingO200K, o200kPiece, regexp2.MustCompile(patternO200K, regexp2.None)},
}

// patternPieces cuts text with pattern, as the regular expression does: the oracle.
func patternPieces(t testing.TB, pattern *regexp2.Regexp, text string) []string {
	var out []string
	m, err := pattern.FindStringMatch(text)
	for ; m != nil && err == nil; m, err = pattern.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// scannedPieces cuts text with piece, as bpe.pieces does.
func scannedPieces(piece func(string) int, text string) []string {
	b := &bpe{piece: piece}
	return slices.Collect(b.pieces(text))
}

// preTokenizerTexts are texts for each turn the patterns take: contractions in both cases and
// half-written, letters of every case class and combining marks, numbers of every kind, runs
// of white space of every kind with and without newlines, slashes after punctuation, CJK,
// emoji and invalid UTF-8.
func preTokenizerTexts() []string {
	texts := append(bpeCorpus(),
		"it's isn't we're they've I'm you'll he'd", "IT'S ISN'T WE'RE THEY'VE I'M YOU'LL HE'D",
		"'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'Re 'rE 'lL",
		"' 'x 'r 'v 'l 'e", "'", "''s",
		"x'sy x'RE'd", "don't'", "HELLOworld helloWORLD HeLLo ǅungla ǈ ǋ", "ʰʲ ˢ xʰ Xʰ",
		"é é Ǆ̃ a\u0301b A\u0301B \u0301 \u0301a \u0301\u0301 x\u0301\u0301's", "\u0301'S",
		"١٢٣٤ ²³ ½ Ⅻ ⅻ 𝟘𝟙 123456 12a 1.5e10", "\u00a0\u00a0x \u2003\u2003\n \u0085\u0085 \u3000日",
		"a\r\n\r\n  \r \n\t b", "  \n  x", " \n", "\n ", "\t\tx", " \t x", "x  ", "x \t", "  ",
		"a/b //c ]/\n/ \"/\r\n/x ?!/", ".\n\n/", " ./", "//", "日本語 の テキスト 東京タワー",
		"😀😀 😀x x😀 🇫🇷🇫🇷", "\xff\xfe'\xffs \xc3\xa9\xc3", "\uFFFD's", "ǅ's Aa'LL A'd",
		"Σας ΚΑΛΗΜΕΡΑ ΣΑς", "ﬁ ﬀ", "\U000E0001\U000E0020",
	)
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []rune("aZ'sStTrReEvVmMlLdD 0١²\n\r\t\u00a0\u2003/.,-\u0301ʰǅ日😀\uFFFD")
	for range 2000 {
		var b strings.Builder
		for range 1 + r.IntN(30) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	return texts
}

// TestPreTokenizersMatchThePatterns: the scanners cut every text into the pieces the
// encodings' patterns cut it into.
func TestPreTokenizersMatchThePatterns(t *testing.T) {
	for _, enc := range encodings {
		for _, text := range preTokenizerTexts() {
			got, want := scannedPieces(enc.piece, text), patternPieces(t, enc.pattern, text)
			if !slices.Equal(got, want) {
				t.Errorf("%s: %q cut into %q, the pattern cuts %q", enc.name, text, got, want)
			}
		}
	}
}

// FuzzPreTokenizers compares the scanners with the patterns on any text.
func FuzzPreTokenizers(f *testing.F) {
	for _, text := range preTokenizerTexts()[:200] {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, enc := range encodings {
			got, want := scannedPieces(enc.piece, text), patternPieces(t, enc.pattern, text)
			if !slices.Equal(got, want) {
				t.Errorf("%s: %q cut into %q, the pattern cuts %q", enc.name, text, got, want)
			}
		}
	})
}

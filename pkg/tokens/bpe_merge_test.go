package tokens

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// referenceCount counts the tokens of text as bpe did before it merged pairs of ranks: each
// piece that is not a token merged by referenceMerge. The oracle of the merge by pairs.
func referenceCount(b *bpe, text string) int64 {
	var n int64
	for piece := range b.pieces(text) {
		if b.isToken(piece) {
			n++
		} else {
			n += int64(referenceMerge(b, piece))
		}
	}
	return n
}

// referenceMerge is tiktoken's byte pair merge as it is written (_byte_pair_merge): the parts
// are spans of the piece's bytes, the rank of a union is that of its bytes, and each merge
// scans the parts for the lowest, the leftmost of equals.
func referenceMerge(b *bpe, piece string) int {
	const none = math.MaxUint32 + 1 // no rank: the union is not a token
	type part struct {
		start int
		rank  int64 // of the union of this part and the next
	}
	parts := make([]part, len(piece)+1)
	for i := range parts {
		parts[i] = part{start: i, rank: none}
	}
	// rankOf is the rank of the union of parts i to i+skip+1, or none.
	rankOf := func(i, skip int) int64 {
		if i+skip+2 < len(parts) {
			if r, ok := b.rank(piece[parts[i].start:parts[i+skip+2].start]); ok {
				return int64(r)
			}
		}
		return none
	}
	for i := 0; i < len(parts)-2; i++ {
		parts[i].rank = rankOf(i, 0)
	}
	for len(parts) > 1 {
		lowest, at := int64(none), -1
		for i := 0; i < len(parts)-1; i++ {
			if parts[i].rank < lowest {
				lowest, at = parts[i].rank, i
			}
		}
		if at < 0 {
			break
		}
		parts[at].rank = rankOf(at, 1)
		if at > 0 {
			parts[at-1].rank = rankOf(at-1, 1)
		}
		parts = append(parts[:at+1], parts[at+2:]...)
	}
	return len(parts) - 1
}

// bothMerges returns what the scan and the heap leave of piece, whatever its length.
func bothMerges(b *bpe, piece string) (scan, heap int) {
	parts := make([]part, len(piece))
	return len(b.mergeScan(b.byteParts(piece, parts))), b.mergeHeap(piece, new(mergeScratch))
}

// loadedEncodings are the encodings' counters, loaded once for the tests of this file.
var loadedEncodings = sync.OnceValues(func() ([]*bpe, error) {
	var out []*bpe
	for _, enc := range encodings {
		b, err := loadVocabulary(enc.name, enc.piece)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
})

func testEncodings(t testing.TB) []*bpe {
	t.Helper()
	bs, err := loadedEncodings()
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// mergeCorpus is bpeCorpus and text that merges at length: scripts whose characters take
// several bytes (CJK, Thai, Devanagari, Hangul, emoji with modifiers and joiners), code, long
// runs of one character and long pieces that the merge finds its pairs for with a heap, and
// random bytes, mostly not UTF-8.
func mergeCorpus() []string {
	texts := append(bpeCorpus(),
		"敏捷的棕色狐狸跳过了懒狗。日本語のテキストを数えます、東京は晴れ。",
		"人工智能代理运行时由一组微服务组成它们通过远程过程调用相互通信并共享上下文与记忆",
		"ภาษาไทยไม่มีการเว้นวรรคระหว่างคำสวัสดีครับยินดีต้อนรับ", "हिन्दी भाषा में लिखा गया पाठ, नमस्ते दुनिया",
		"한국어 텍스트를 세는 중입니다. 안녕하세요 세계", "👩‍👩‍👧‍👦👨🏿‍💻🏳️‍🌈 emoji ❤️‍🔥 joined",
		"package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfor i := range 10 {\n\t\tfmt.Printf(\"%d\\n\", i*i)\n\t}\n}\n",
		"SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days' ORDER BY id DESC;",
		"aGVsbG8gd29ybGQhIHRoaXMgaXMgYmFzZTY0IGVuY29kZWQgdGV4dA==",
		"0x7fffffffffffffff 0b101010 1e-9 3.141592653589793238462643383279",
		strings.Repeat("日", 700), strings.Repeat("ab", 600), strings.Repeat("é", 900),
		strings.Repeat(" ", 1500), strings.Repeat("\n", 300), strings.Repeat("😀", 250),
		strings.Repeat("ไทย", 200), strings.Repeat("-", 1000), strings.Repeat("9", 100),
		strings.Repeat("z", 2000), strings.Repeat("的", 1)+strings.Repeat("了", 400),
		strings.Repeat("人工智能代理运行时", 40), strings.Repeat("antidisestablishment", 60),
	)
	r := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		b := make([]byte, 1+r.IntN(300))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		texts = append(texts, string(b))
	}
	words := []string{"的", "了", "是", "テキスト", "東京", "ไทย", "한국", "😀", "é", "the", "ing", "ab", "\xe6", " "}
	for range 100 {
		var b strings.Builder
		for range 1 + r.IntN(200) {
			b.WriteString(words[r.IntN(len(words))])
		}
		texts = append(texts, b.String())
	}
	return texts
}

// checkMerges fails t where bpe counts text otherwise than referenceCount, or where the scan
// or the heap merges a piece of text otherwise than referenceMerge.
func checkMerges(t *testing.T, b *bpe, text string) {
	t.Helper()
	if got, want := b.count(text), referenceCount(b, text); got != want {
		t.Errorf("%q (%d bytes) counts %d tokens, the merge by bytes %d", text, len(text), got, want)
	}
	for piece := range b.pieces(text) {
		if len(piece) < 2 || b.isToken(piece) {
			continue
		}
		want := referenceMerge(b, piece)
		if scan, heap := bothMerges(b, piece); scan != want || heap != want {
			t.Errorf("piece %q: the scan leaves %d parts, the heap %d, the merge by bytes %d", piece, scan, heap, want)
		}
	}
}

// TestBPEMergesAsBefore: merging pairs of tokens' ranks, by scan or heap, counts every text of
// the corpus as merging spans of bytes did, for both encodings.
func TestBPEMergesAsBefore(t *testing.T) {
	for i, b := range testEncodings(t) {
		t.Run(encodings[i].name, func(t *testing.T) {
			for _, text := range mergeCorpus() {
				checkMerges(t, b, text)
			}
		})
	}
}

// TestBPEMergesEveryToken: the bytes of every token of both encodings merge into the token,
// by scan and by heap, as they do by bytes: the pairs are complete.
func TestBPEMergesEveryToken(t *testing.T) {
	for i, b := range testEncodings(t) {
		vocabulary, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe(encodings[i].name + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		scratch, parts := new(mergeScratch), make([]part, 256)
		for token := range vocabulary {
			if len(token) < 2 {
				continue
			}
			want := referenceMerge(b, token)
			scan, heap := len(b.mergeScan(b.byteParts(token, parts[:len(token)]))), b.mergeHeap(token, scratch)
			if want != 1 || scan != want || heap != want {
				t.Errorf("%s: token %q merges into %d parts by scan, %d by heap, %d by bytes",
					encodings[i].name, token, scan, heap, want)
			}
		}
	}
}

// TestBPEMergesAnyVocabulary: with random vocabularies of short tokens over three letters,
// ranked at random (a token may rank below the tokens its bytes merge through, which
// tiktoken's encodings never do, and some tokens are never made by a merge), the merge by
// pairs counts random words as the merge by bytes.
func TestBPEMergesAnyVocabulary(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for v := range 200 {
		vocabulary := map[string]int{}
		for c := range 256 {
			vocabulary[string([]byte{byte(c)})] = 0
		}
		for range 5 + r.IntN(60) {
			var w []byte
			for range 2 + r.IntN(5) {
				w = append(w, "abc"[r.IntN(3)])
			}
			vocabulary[string(w)] = 0
		}
		ranks := r.Perm(len(vocabulary))
		for i, token := range slices.Sorted(maps.Keys(vocabulary)) {
			vocabulary[token] = ranks[i]
		}
		b, err := newBPE(cl100kPiece, vocabulary)
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			w := make([]byte, 1+r.IntN(60))
			for i := range w {
				w[i] = "abc"[r.IntN(3)]
			}
			checkMerges(t, b, string(w))
		}
		if t.Failed() {
			t.Fatalf("vocabulary %d: %v", v, vocabulary)
		}
	}
}

// FuzzBPECount compares the merge by pairs with the merge by bytes on any text, for both
// encodings.
func FuzzBPECount(f *testing.F) {
	for _, text := range mergeCorpus() {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, b := range testEncodings(t) {
			checkMerges(t, b, text)
		}
	})
}

func TestNewBPERejectsABadVocabulary(t *testing.T) {
	with := func(more map[string]int) map[string]int {
		vocabulary := map[string]int{}
		for c := range 256 {
			vocabulary[string([]byte{byte(c)})] = c
		}
		for token, rank := range more {
			vocabulary[token] = rank
		}
		return vocabulary
	}
	if _, err := newBPE(cl100kPiece, with(map[string]int{"ab": 256})); err != nil {
		t.Fatalf("a good vocabulary: %v", err)
	}
	noByte := with(nil)
	delete(noByte, "\xff")
	for name, vocabulary := range map[string]map[string]int{
		"a negative rank":  {"a": -1},
		"a rank too high":  with(map[string]int{"ab": maxRank + 1}),
		"a rank twice":     with(map[string]int{"ab": 256, "cd": 256}),
		"a byte not token": noByte,
	} {
		if _, err := newBPE(cl100kPiece, vocabulary); err == nil {
			t.Errorf("%s was accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestRankTables: the hash and pair tables find what was put in them and nothing else, when
// full to the size they were made for (some runs of slots wrap past the end).
func TestRankTables(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 2, 3, 100, 5000} {
		hashes, h := map[uint64]uint32{}, newHashTable(n)
		pairs, p := map[[2]uint32]uint32{}, newPairTable(n)
		for i := range uint32(n) {
			key := r.Uint64() | 1<<63 // the top bits: the last slot's run wraps
			if i%2 == 0 {
				key = r.Uint64() >> 1
			}
			hashes[key] = i
			if !h.put(key, i) {
				t.Fatalf("hash %#x put twice", key)
			}
			x, y := r.Uint32N(maxRank+1), r.Uint32N(maxRank+1)
			if _, dup := pairs[[2]uint32{x, y}]; !dup {
				pairs[[2]uint32{x, y}] = i
				p.put(x, y, i)
			}
		}
		for key, rank := range hashes {
			if got, ok := h.get(key); !ok || got != rank {
				t.Errorf("n=%d: hash %#x = %d, %t; want %d", n, key, got, ok, rank)
			}
			if h.put(key, rank) {
				t.Errorf("n=%d: hash %#x put again", n, key)
			}
		}
		for pair, rank := range pairs {
			if got := p.get(pair[0], pair[1]); got != rank {
				t.Errorf("n=%d: pair %v = %d, want %d", n, pair, got, rank)
			}
		}
		for range 1000 {
			if key := r.Uint64(); hashes[key] == 0 {
				if _, ok := h.get(key); ok {
					t.Errorf("n=%d: hash %#x found, never put", n, key)
				}
			}
			x, y := r.Uint32N(maxRank+1), r.Uint32N(maxRank+1)
			if _, ok := pairs[[2]uint32{x, y}]; !ok && p.get(x, y) != noRank {
				t.Errorf("n=%d: pair %d, %d found, never put", n, x, y)
			}
		}
	}
}

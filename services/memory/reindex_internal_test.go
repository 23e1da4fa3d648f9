package memory

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// termFrequenciesV1 is termFrequencies as terms version 1 indexed a memory (the release of
// c78c536): lowercase runs of letters and digits, stopwords left out.
func termFrequenciesV1(text string) (map[string]int, int) {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	words = slices.DeleteFunc(words, func(w string) bool { return stopwords[w] })
	freq := make(map[string]int, len(words))
	for _, w := range words {
		freq[w]++
	}
	return freq, len(words)
}

// The shortcut of ReindexTerms (plainTermsSince): a plain text is indexed by termsVersion as
// version 1 indexed it (and so as every version between, which changed only the characters
// termsChanged tells), on texts drawn from every kind of character the versions treat apart,
// and a text that is not plain holds such a character.
func TestPlainTextIsIndexedAsVersion1Did(t *testing.T) {
	// Characters of each kind: ASCII letters, digits, punctuation and stopwords; letters of
	// other spaced scripts, with case (Latin, Greek, Cyrillic, the Turkish dotted I, Georgian,
	// Armenian, Cherokee) or without (Hangul, Arabic, Devanagari); marks and symbols; the
	// scripts written without spaces; full-width letters, digits and punctuation, and the
	// half-width Katakana; an invalid byte.
	pieces := []string{"a", "Z", "the", "of", "To", "7", " ", "-", "'", ".", "\t", "\n",
		"é", "Ä", "ß", "Σ", "ς", "Ж", "İ", "ı", "Ⴀ", "Ա", "Ꭰ", "ꭰ", "서울", "مرحبا", "नमस्ते",
		"\u0301", "€", "😀", "ǅ",
		"東", "京", "に", "タ", "ー", "ｰ", "ｱ", "ก", "ร", "ລ", "ក", "က",
		"Ａ", "ａ", "２", "！", "～", "\xff"}
	rng := rand.New(rand.NewPCG(1, 2))
	plain, notPlain := 0, 0
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		text := b.String()
		freq, length := termFrequencies(text)
		v1, v1Length := termFrequenciesV1(text)
		same := maps.Equal(freq, v1) && length == v1Length
		if plainText(text) {
			plain++
			if !same {
				t.Fatalf("plain %q: indexed as %v (%d terms), version 1 indexed %v (%d)",
					text, freq, length, v1, v1Length)
			}
			continue
		}
		notPlain++
	}
	if plain < 1000 || notPlain < 1000 {
		t.Errorf("%d plain texts and %d others drawn: too few of one kind to tell", plain, notPlain)
	}
	for _, r := range []rune{'東', 'に', 'タ', 'ー', 'ｰ', 'ก', 'ລ', 'ក', 'က', 'Ａ', 'ａ', '２', '！'} {
		if plainText("abc " + string(r)) {
			t.Errorf("a text holding %q is plain", r)
		}
	}
}

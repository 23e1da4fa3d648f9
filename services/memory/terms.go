package memory

import (
	"slices"
	"strings"
	"unicode"
)

// stopwords are left out of documents and queries.
var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true,
	"by": true, "do": true, "for": true, "from": true, "in": true, "is": true, "it": true,
	"of": true, "on": true, "or": true, "that": true, "the": true, "this": true, "to": true,
	"was": true, "were": true, "what": true, "with": true,
}

// unspacedScripts are the scripts written without spaces between words, each its own kind of
// run: Chinese and Japanese (Han, Hiragana and Katakana, which mix in one text), Thai, Lao,
// Khmer and Myanmar.
var unspacedScripts = [][]*unicode.RangeTable{
	{unicode.Han, unicode.Hiragana, unicode.Katakana},
	{unicode.Thai},
	{unicode.Lao},
	{unicode.Khmer},
	{unicode.Myanmar},
}

// unspaced returns the kind of run (1 and up: the index in unspacedScripts, plus one) of r, a
// character of a script written without spaces, or 0 for any other character. The prolonged
// sound marks of Katakana, of no script of their own, are Japanese.
func unspaced(r rune) int {
	if r < '\u0E00' { // below Thai, the first of them: Latin, Cyrillic, Arabic, Hebrew…
		return 0
	}
	if r == '\u30FC' || r == '\uFF70' {
		return 1
	}
	for i, tables := range unspacedScripts {
		if unicode.In(r, tables...) {
			return i + 1
		}
	}
	return 0
}

// fullWidthOffset is how far the full-width forms of the ASCII characters (U+FF01 to U+FF5E,
// as Japanese and Chinese text writes Latin letters and digits) are from them.
const fullWidthOffset = '\uFF01' - '!'

// fullWidth reports whether r is the full-width form of an ASCII character, which terms reads
// as that character: "２０２４" is the word "2024".
func fullWidth(r rune) bool { return r >= '\uFF01' && r <= '\uFF5E' }

// terms splits text into lowercase words (runs of letters and digits) without stopwords. A
// run of a script written without spaces (unspaced), which holds words with nothing between
// them, is split into its overlapping pairs of characters ("東京に" into "東京" and "京に"),
// as Lucene's CJKAnalyzer does, so that a word of the query finds the text holding it; a run
// of one character is its own term. These are a query's terms: a memory is indexed by
// indexTerms.
func terms(text string) []string { return splitTerms(text, false) }

// indexTerms returns the terms of text as a memory is indexed by them: terms, and each
// character of a run of a script written without spaces as a term too, so that a query of
// one character (a word of its own, as 猫) finds the runs holding it.
func indexTerms(text string) []string { return splitTerms(text, true) }

// splitTerms returns terms of text, with the characters of runs of more than one character
// of a script written without spaces when unigrams is set.
func splitTerms(text string, unigrams bool) []string {
	var out []string
	var word strings.Builder
	var run []rune
	kind := 0 // the kind of run (unspaced) of run
	endWord := func() {
		if w := word.String(); w != "" && !stopwords[w] {
			out = append(out, w)
		}
		word.Reset()
	}
	endRun := func() {
		if len(run) == 1 || unigrams {
			for _, r := range run {
				out = append(out, string(r))
			}
		}
		for i := 1; i < len(run); i++ {
			out = append(out, string(run[i-1:i+1]))
		}
		run = run[:0]
	}
	for _, r := range strings.ToLower(text) {
		if fullWidth(r) {
			r -= fullWidthOffset
		}
		switch k := unspaced(r); {
		case k != 0:
			endWord()
			if k != kind {
				endRun()
				kind = k
			}
			run = append(run, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			endRun()
			word.WriteRune(r)
		default:
			endWord()
			endRun()
		}
	}
	endWord()
	endRun()
	return out
}

// termFrequencies returns how often each term of a memory's text (indexTerms) occurs in it and
// how many it has.
func termFrequencies(text string) (freq map[string]int, length int) {
	words := indexTerms(text)
	freq = make(map[string]int, len(words))
	for _, w := range words {
		freq[w]++
	}
	return freq, len(words)
}

// queryTerms returns the distinct terms of a query, sorted.
func queryTerms(query string) []string {
	return slices.Compact(slices.Sorted(slices.Values(terms(query))))
}

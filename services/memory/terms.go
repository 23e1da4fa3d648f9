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

// terms splits text into lowercase words (runs of letters and digits) without stopwords.
func terms(text string) []string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	return slices.DeleteFunc(words, func(w string) bool { return stopwords[w] })
}

// termFrequencies returns how often each term occurs in text and how many terms it has.
func termFrequencies(text string) (freq map[string]int, length int) {
	words := terms(text)
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

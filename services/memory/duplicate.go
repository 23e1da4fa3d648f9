package memory

import (
	"cmp"
	"slices"
)

// DuplicateSimilarity is the cosine similarity from which a learned fact's embedding counts
// as saying what a stored memory's says: high enough that paraphrases count and a changed
// detail ("green" to "blue") usually does not.
const DuplicateSimilarity = 0.95

// duplicate returns the id of the candidate that holds what q.Query says (see
// Store.DuplicateMemory): one with the same terms, as many times each (the oldest of them),
// else the one whose vector is most similar to q.Vector, at least minCosine. candidates must
// include every memory of the collection that holds one of the query's terms and, when
// q.Vector is set, every memory with a vector.
func duplicate(q SearchQuery, minCosine float64, candidates []rankDoc) string {
	freq, length := termFrequencies(q.Query)
	candidates = slices.Clone(candidates)
	slices.SortFunc(candidates, func(a, b rankDoc) int {
		return cmp.Or(cmp.Compare(a.createdAt, b.createdAt), cmp.Compare(a.id, b.id))
	})
	if length > 0 {
		qterms := queryTerms(q.Query)
		for _, d := range candidates {
			if sameTerms(freq, length, qterms, d) {
				return d.id
			}
		}
	}
	if q.Vector == nil {
		return ""
	}
	best, bestCosine := "", minCosine
	for _, d := range candidates {
		if c := cosine(q.Vector, d.vector); c >= bestCosine && (best == "" || c > bestCosine) {
			best, bestCosine = d.id, c
		}
	}
	return best
}

// sameTerms reports whether d holds the terms of freq, the index terms of a text of length
// terms: as many terms as it, and each of its query terms qterms as often (d.freq holds at
// least these; the characters of its runs of unspaced scripts, indexed too, are counted in
// the length only, as a search reads the memories sharing a query term).
func sameTerms(freq map[string]int, length int, qterms []string, d rankDoc) bool {
	if d.length != length {
		return false
	}
	for _, t := range qterms {
		if n := freq[t]; d.freq[t] != n {
			return false
		}
	}
	return true
}

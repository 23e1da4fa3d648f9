package memory

import (
	"cmp"
	"math"
	"slices"
)

// BM25 parameters: term-frequency saturation and length normalisation.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// SemanticWeight is the share of cosine similarity in the relevance of a semantic search;
// the rest is the normalised BM25 score. See the package documentation.
const SemanticWeight = 0.8

// rankDoc is what ranking needs of one memory.
type rankDoc struct {
	id        string
	createdAt int64 // Unix nanoseconds
	length    int   // number of terms of the content
	// freq holds the frequencies of (at least) the query's terms in the content.
	freq map[string]int
	// vector is the memory's embedding; nil when it has none.
	vector []float32
}

// corpus describes the memories one search ranks against: one user's collection.
type corpus struct {
	docs        int   // number of memories
	totalLength int64 // sum of their lengths, in terms
}

// rankedDoc is a memory with its relevance.
type rankedDoc struct {
	id        string
	createdAt int64
	score     float64
}

// rank scores candidates for q and returns the hits: score > 0 and at least q.MinScore, best
// first, equal scores newest first (by creation time, then id), at most q.Limit.
//
// candidates must include every memory of the corpus that holds one of qterms and, when
// q.Vector is set, every memory with a vector: document frequencies are counted over them.
//
// The lexical score is Okapi BM25 (idf = ln(1 + (N-df+0.5)/(df+0.5))) divided by the best
// candidate's, so it lies in [0, 1] and the best lexical match scores 1. Without q.Vector it
// is the relevance. With q.Vector the relevance is SemanticWeight·max(0, cos) +
// (1-SemanticWeight)·lexical, where cos is the cosine similarity of the two vectors (0 for a
// memory without a vector or with a vector of another length).
func rank(q SearchQuery, qterms []string, c corpus, candidates []rankDoc) []rankedDoc {
	lexical := bm25(qterms, c, candidates)
	var best float64
	for _, s := range lexical {
		best = math.Max(best, s)
	}
	var hits []rankedDoc
	for i, d := range candidates {
		var score float64
		if best > 0 {
			score = lexical[i] / best
		}
		if q.Vector != nil {
			score = SemanticWeight*math.Max(0, cosine(q.Vector, d.vector)) + (1-SemanticWeight)*score
		}
		if score > 0 && score >= q.MinScore {
			hits = append(hits, rankedDoc{id: d.id, createdAt: d.createdAt, score: min(score, 1)})
		}
	}
	slices.SortFunc(hits, func(a, b rankedDoc) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		if c := cmp.Compare(b.createdAt, a.createdAt); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	return hits[:min(len(hits), q.Limit)]
}

// bm25 returns the raw BM25 score of every candidate, in order.
func bm25(qterms []string, c corpus, candidates []rankDoc) []float64 {
	scores := make([]float64, len(candidates))
	if len(qterms) == 0 || c.docs == 0 {
		return scores
	}
	df := make(map[string]int, len(qterms))
	for _, d := range candidates {
		for _, t := range qterms {
			if d.freq[t] > 0 {
				df[t]++
			}
		}
	}
	n := float64(c.docs)
	avgLen := math.Max(float64(c.totalLength)/n, 1)
	for i, d := range candidates {
		for _, t := range qterms {
			tf := float64(d.freq[t])
			if tf == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			scores[i] += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(d.length)/avgLen))
		}
	}
	return scores
}

// cosine is the cosine similarity of a and b; 0 when their lengths differ or either is zero.
func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

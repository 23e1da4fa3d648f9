package memory

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"unicode"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
)

// BM25 parameters: term-frequency saturation and length normalisation.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
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

// document is a memory with its term frequencies, ready for ranking.
type document struct {
	memory *memoryv1.Memory
	freq   map[string]int
	length int
}

func newDocument(m *memoryv1.Memory) document {
	words := terms(m.GetContent())
	freq := make(map[string]int, len(words))
	for _, w := range words {
		freq[w]++
	}
	return document{memory: m, freq: freq, length: len(words)}
}

// rankBM25 scores docs against query with Okapi BM25 (idf = ln(1 + (N-df+0.5)/(df+0.5))),
// divides every score by the best one so scores fall in (0, 1], and returns the documents
// with a positive score, best first; equal scores list the newer memory first.
func rankBM25(query string, docs []document) []*memoryv1.MemoryHit {
	qterms := slices.Compact(slices.Sorted(slices.Values(terms(query))))
	if len(qterms) == 0 || len(docs) == 0 {
		return nil
	}
	var total int
	df := make(map[string]int, len(qterms))
	for _, d := range docs {
		total += d.length
		for _, t := range qterms {
			if d.freq[t] > 0 {
				df[t]++
			}
		}
	}
	n := float64(len(docs))
	avgLen := math.Max(float64(total)/n, 1)

	type scored struct {
		doc   document
		score float64
	}
	var ranked []scored
	var best float64
	for _, d := range docs {
		var score float64
		for _, t := range qterms {
			tf := float64(d.freq[t])
			if tf == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			score += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(d.length)/avgLen))
		}
		if score > 0 {
			ranked = append(ranked, scored{d, score})
			best = math.Max(best, score)
		}
	}
	slices.SortFunc(ranked, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return newerFirst(a.doc.memory, b.doc.memory)
	})
	hits := make([]*memoryv1.MemoryHit, len(ranked))
	for i, r := range ranked {
		hits[i] = &memoryv1.MemoryHit{Memory: r.doc.memory, RelevanceScore: r.score / best}
	}
	return hits
}

// newerFirst orders memories newest first: by creation time, then by id, both descending.
func newerFirst(a, b *memoryv1.Memory) int {
	if c := b.GetCreatedAt().AsTime().Compare(a.GetCreatedAt().AsTime()); c != 0 {
		return c
	}
	return cmp.Compare(b.GetId(), a.GetId())
}

package generation

import (
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// RulesEmbeddingDims is the length of the rules provider's vectors.
const RulesEmbeddingDims = 64

// stopWords carry no topic and are left out of hashed vectors.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true,
	"do": true, "does": true, "for": true, "from": true, "how": true, "i": true, "in": true, "is": true,
	"it": true, "of": true, "on": true, "or": true, "that": true, "the": true, "this": true, "to": true,
	"was": true, "what": true, "when": true, "where": true, "which": true, "who": true, "why": true,
	"with": true, "you": true,
}

// hashEmbedding is a hashed bag of words: each lower-cased word that is not a stop word adds
// ±1 to one of RulesEmbeddingDims buckets (bucket and sign from its FNV-1a hash), and the
// vector is L2-normalised. Texts sharing words score high under cosine similarity; a text
// without words is the zero vector.
func hashEmbedding(text string) []float32 {
	v := make([]float32, RulesEmbeddingDims)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		if stopWords[w] {
			continue
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		sum := h.Sum64()
		sign := float32(1)
		if sum>>63 == 1 {
			sign = -1
		}
		v[sum%RulesEmbeddingDims] += sign
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		return v
	}
	scale := float32(1 / math.Sqrt(norm))
	for i := range v {
		v[i] *= scale
	}
	return v
}

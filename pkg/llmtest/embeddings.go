package llmtest

import (
	"hash/fnv"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// EmbeddingDims is the length of the vectors the server returns.
const EmbeddingDims = 32

// handleEmbeddings answers POST /v1/embeddings with deterministic vectors and their usage
// (none when OmitEmbeddingUsage says so).
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	req, ok := s.decode(w, r, openAIAPI)
	if !ok {
		return
	}
	if len(req.Input) == 0 {
		msg := s.recordf("embeddings request has no input")
		writeJSON(w, http.StatusBadRequest, newErrorBody("invalid_request_error", "", "llmtest: %s", msg))
		return
	}
	out := embeddingList{Object: "list", Model: req.Model}
	tokens := 0
	for i, text := range req.Input {
		out.Data = append(out.Data, embeddingItem{Object: "embedding", Index: i, Embedding: Embed(text)})
		tokens += ceilDiv(len(text), 4)
	}
	s.mu.Lock()
	omit := s.noUsage
	s.mu.Unlock()
	if !omit {
		out.Usage = &usagePayload{PromptTokens: tokens, TotalTokens: tokens}
	}
	writeJSON(w, http.StatusOK, out)
}

// Embed returns the vector the server gives text: each lower-cased word hashed into one of
// EmbeddingDims buckets, L2-normalised. The same text always gives the same vector; a text
// without words gives the zero vector.
func Embed(text string) []float32 {
	v := make([]float32, EmbeddingDims)
	fields := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, word := range fields {
		h := fnv.New32a()
		_, _ = h.Write([]byte(word))
		v[h.Sum32()%EmbeddingDims]++
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

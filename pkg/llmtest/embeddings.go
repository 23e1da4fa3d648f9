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
	if hold := s.embedHoldFor(req.Input); hold != nil && !await(s, w, r, hold) {
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

// embedHold holds the embeddings requests with an input containing text (HoldEmbeddings).
type embedHold struct {
	text string
	hold <-chan struct{}
}

// HoldEmbeddings holds every embeddings request with an input containing text until hold is
// closed (or the client gives up, or the server closes), as Turn.Hold holds a chat turn: a
// test sees what a stage does while its embeddings are slow.
func (s *Server) HoldEmbeddings(text string, hold <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embedHolds = append(s.embedHolds, embedHold{text: text, hold: hold})
}

// embedHoldFor returns the hold of the first HoldEmbeddings whose text one of the inputs
// contains, nil when none does.
func (s *Server) embedHoldFor(inputs []string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.embedHolds {
		for _, in := range inputs {
			if strings.Contains(in, h.text) {
				return h.hold
			}
		}
	}
	return nil
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

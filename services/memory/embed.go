package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// Embedder turns texts into embedding vectors, one per text, in order. It accounts the
// request it made with an EMBEDDING entry, also when the request failed, or returns a nil
// entry when it made none that a run should account (an embedder in the process).
type Embedder interface {
	Embed(ctx context.Context, texts []string) (vectors [][]float32, entry *typev1.AccountingEntry, err error)
}

// GenerationEmbedder is an Embedder backed by the GenerationService's Embed RPC.
type GenerationEmbedder struct {
	// Client calls the GenerationService. Its connection must not retry calls (dial.WithoutRetry):
	// each Embed is a paid provider request, accounted once.
	Client generationv1.GenerationServiceClient
	// Target is the provider/model that embeds.
	Target *typev1.Target
}

var _ Embedder = (*GenerationEmbedder)(nil)

// Embed asks the GenerationService for one vector per text and accounts the request with the
// target's provider and model, its latency, the characters embedded and the tokens the
// provider reported. An answer with another number of vectors, or an empty vector, is an
// error (the request is still accounted as made, ok: it was answered).
func (e *GenerationEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, *typev1.AccountingEntry, error) {
	start := time.Now()
	resp, err := e.Client.Embed(ctx, &generationv1.EmbedRequest{Target: e.Target, Inputs: texts})
	entry := &typev1.AccountingEntry{
		Type: typev1.AccountingType_ACCOUNTING_TYPE_EMBEDDING, Provider: e.Target.GetProvider(), Model: e.Target.GetModel(),
		Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK, LatencyMs: time.Since(start).Milliseconds(),
		TimestampMs: time.Now().UnixMilli(), Attempts: 1, Tokens: resp.GetUsage(), CostUsd: resp.GetCostUsd(),
	}
	for _, t := range texts {
		entry.CharactersIn += int64(utf8.RuneCountInString(t))
	}
	if err != nil {
		entry.Status, entry.Error = typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED, stageerr.FromError(err).Error()
		return nil, entry, fmt.Errorf("embed with %s/%s: %w", e.Target.GetProvider(), e.Target.GetModel(), err)
	}
	if got := len(resp.GetEmbeddings()); got != len(texts) {
		return nil, entry, fmt.Errorf("embed with %s/%s: %d vectors for %d texts", e.Target.GetProvider(), e.Target.GetModel(), got, len(texts))
	}
	vectors := make([][]float32, len(texts))
	for i, emb := range resp.GetEmbeddings() {
		if len(emb.GetValues()) == 0 {
			return nil, entry, fmt.Errorf("embed with %s/%s: vector %d is empty", e.Target.GetProvider(), e.Target.GetModel(), i)
		}
		vectors[i] = emb.GetValues()
	}
	return vectors, entry, nil
}

// embedOne embeds one text with the service's embedder; entry accounts the request, when the
// embedder made one, also on failure.
func (s *Service) embedOne(ctx context.Context, text string) (vector []float32, entry *typev1.AccountingEntry, err error) {
	vectors, entry, err := s.embedder.Embed(ctx, []string{text})
	if err != nil {
		return nil, entry, err
	}
	if len(vectors) != 1 || len(vectors[0]) == 0 {
		return nil, entry, errors.New("the embedder returned no vector")
	}
	if i, ok := notFinite(vectors[0]); ok {
		return nil, entry, fmt.Errorf("the embedder returned a vector whose value %d is %v",
			i, vectors[0][i])
	}
	return vectors[0], entry, nil
}

// notFinite returns the index of the first value of v that is NaN or an infinity, which no
// embedding holds: any similarity with such a vector is NaN, a relevance no search finds (not
// even by the memory's words), and a query's would make a search find nothing.
func notFinite(v []float32) (int, bool) {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i, true
		}
	}
	return 0, false
}

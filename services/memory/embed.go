package memory

import (
	"context"
	"errors"
	"fmt"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Embedder turns texts into embedding vectors, one per text, in order.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// GenerationEmbedder is an Embedder backed by the GenerationService's Embed RPC.
type GenerationEmbedder struct {
	// Client calls the GenerationService.
	Client generationv1.GenerationServiceClient
	// Target is the provider/model that embeds.
	Target *typev1.Target
}

var _ Embedder = (*GenerationEmbedder)(nil)

// Embed asks the GenerationService for one vector per text. An answer with another number of
// vectors, or an empty vector, is an error.
func (e *GenerationEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	resp, err := e.Client.Embed(ctx, &generationv1.EmbedRequest{Target: e.Target, Inputs: texts})
	if err != nil {
		return nil, fmt.Errorf("embed with %s/%s: %w", e.Target.GetProvider(), e.Target.GetModel(), err)
	}
	if got := len(resp.GetEmbeddings()); got != len(texts) {
		return nil, fmt.Errorf("embed with %s/%s: %d vectors for %d texts", e.Target.GetProvider(), e.Target.GetModel(), got, len(texts))
	}
	vectors := make([][]float32, len(texts))
	for i, emb := range resp.GetEmbeddings() {
		if len(emb.GetValues()) == 0 {
			return nil, fmt.Errorf("embed with %s/%s: vector %d is empty", e.Target.GetProvider(), e.Target.GetModel(), i)
		}
		vectors[i] = emb.GetValues()
	}
	return vectors, nil
}

// embedOne embeds one text with the service's embedder.
func (s *Service) embedOne(ctx context.Context, text string) ([]float32, error) {
	vectors, err := s.embedder.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	if len(vectors) != 1 || len(vectors[0]) == 0 {
		return nil, errors.New("the embedder returned no vector")
	}
	return vectors[0], nil
}

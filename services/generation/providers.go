package generation

import (
	"context"
	"maps"
	"slices"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
)

// ListProviders names the providers the service calls, sorted.
func (s *Service) ListProviders(context.Context, *generationv1.ListProvidersRequest) (*generationv1.ListProvidersResponse, error) {
	return &generationv1.ListProvidersResponse{Providers: slices.Sorted(maps.Keys(s.providers))}, nil
}

// Command generation serves agentmesh's GenerationService (agentmesh.generation.v1) with health
// and reflection: the only service that talks to LLM providers. LISTEN_ADDR sets its address
// (default 127.0.0.1:7004); AGENTMESH_CONFIG names the configuration file with the providers.
// Stopping, it takes no new call and lets those in flight finish for up to
// generation.DrainTimeout (the default step timeout and 5 s; DRAIN_TIMEOUT_MS sets another).
package main

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/generation"
)

func main() {
	server.Main("generation", "127.0.0.1:7004", func(_ context.Context, cfg *config.Config) (server.Registrar, error) {
		providers, err := generation.ProvidersFromConfig(cfg)
		if err != nil {
			return nil, err
		}
		svc := generation.New(generation.Options{Providers: providers, Prices: generation.PricesFromConfig(cfg)})
		return server.WithDrainTimeout(svc, generation.DrainTimeout(cfg)), nil
	})
}

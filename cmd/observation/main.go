// Command observation serves agentmesh's ObservationService (agentmesh.observation.v1) with health and
// reflection. LISTEN_ADDR sets its address (default 127.0.0.1:7006), AGENTMESH_CONFIG the
// configuration file, GENERATION_ADDR the generation service that summarises large results when
// models.observation is set (default services.generation; dialled lazily, so either may start
// first: until it answers, results are truncated). Stopping, it takes no new call and lets
// those in flight finish: with a model, for up to observation.DrainTimeout.
package main

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/observation"
)

func main() {
	server.Main("observation", "127.0.0.1:7006", func(_ context.Context, cfg *config.Config) (server.Registrar, error) {
		opts := observation.OptionsFromConfig(cfg)
		if opts.Model != nil {
			client, err := server.DialGeneration(cfg)
			if err != nil {
				return nil, err
			}
			opts.Generation = client
		}
		if d, ok := observation.DrainTimeout(cfg); ok {
			return server.WithDrainTimeout(observation.New(opts), d), nil
		}
		return observation.New(opts), nil
	})
}

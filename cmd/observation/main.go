// Command observation serves agentmesh's ObservationService (agentmesh.observation.v1) with health and
// reflection. LISTEN_ADDR sets its address (default 127.0.0.1:7006), AGENTMESH_CONFIG the
// configuration file, GENERATION_ADDR the generation service that summarises large results when
// models.observation is set (default services.generation; dialled lazily, so either may start
// first: until it answers, results are truncated).
package main

import (
	"context"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/observation"
)

func main() {
	server.Main("observation", "127.0.0.1:7006", func(_ context.Context, cfg *config.Config) (server.Registrar, error) {
		opts := observation.OptionsFromConfig(cfg)
		if opts.Model != nil {
			mesh, err := cfg.TLS.Mesh()
			if err != nil {
				return nil, exitcode.Wrap(exitcode.Invalid, err)
			}
			// Each summary is a paid provider request, accounted once: no retry of UNAVAILABLE.
			conn, err := dial.New(server.Env("GENERATION_ADDR", cfg.Services.Generation), dial.WithoutRetry(), dial.WithMesh(mesh),
				dial.WithMaxMessageBytes(cfg.GRPC.MaxMessageBytes))
			if err != nil {
				return nil, exitcode.Wrap(exitcode.Invalid, err)
			}
			opts.Generation = generationv1.NewGenerationServiceClient(conn)
		}
		return observation.New(opts), nil
	})
}

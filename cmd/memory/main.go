// Command memory serves agentmesh's MemoryService (agentmesh.memory.v1). LISTEN_ADDR sets its
// address (default 127.0.0.1:7007), AGENTMESH_CONFIG the configuration file, GENERATION_ADDR the
// generation service that embeds when memory.embeddings is set (default services.generation;
// dialled lazily, so either may start first: until it answers, searches rank with BM25).
package main

import (
	"context"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/memory"
)

func main() {
	server.Main("memory", "127.0.0.1:7007", func(ctx context.Context, cfg *config.Config) (server.Registrar, error) {
		var embedder memory.Embedder
		if target := memory.EmbeddingTarget(cfg); target != nil {
			mesh, err := cfg.TLS.Mesh()
			if err != nil {
				return nil, exitcode.Wrap(exitcode.Invalid, err)
			}
			// Each Embed is a paid provider request, accounted once: no retry of UNAVAILABLE.
			conn, err := dial.New(server.Env("GENERATION_ADDR", cfg.Services.Generation), dial.WithoutRetry(), dial.WithMesh(mesh),
				dial.WithMaxMessageBytes(cfg.GRPC.MaxMessageBytes))
			if err != nil {
				return nil, exitcode.Wrap(exitcode.Invalid, err)
			}
			embedder = &memory.GenerationEmbedder{Client: generationv1.NewGenerationServiceClient(conn), Target: target}
		}
		opts, err := memory.OptionsFromConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		opts.Embedder = embedder
		return memory.New(opts), nil
	})
}

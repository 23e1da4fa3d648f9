// Command memory serves agentmesh's MemoryService (agentmesh.memory.v1). LISTEN_ADDR sets its
// address (default 127.0.0.1:7007), AGENTMESH_CONFIG the configuration file, GENERATION_ADDR the
// generation service that embeds when memory.embeddings is set and picks the facts of finished
// runs when models.memory is (default services.generation; dialled lazily, so either may start
// first: until it answers, searches rank with BM25 and the rules pick the facts). On PostgreSQL
// (memory.store postgres) it starts NOT_SERVING while its database does not answer, and creates
// its schema once it does. Stopping, it learns from no more finished runs and lets the learning
// in flight finish (with models.memory or memory.embeddings, for up to memory.DrainTimeout),
// then its calls.
package main

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/memory"
)

func main() {
	server.Main("memory", "127.0.0.1:7007", func(ctx context.Context, cfg *config.Config) (server.Registrar, error) {
		var (
			embedder memory.Embedder
			facts    *ask.Model
		)
		if embedding, picking := memory.EmbeddingTarget(cfg), memory.FactsTarget(cfg); embedding != nil || picking != nil {
			client, err := server.DialGeneration(cfg)
			if err != nil {
				return nil, err
			}
			if embedding != nil {
				embedder = &memory.GenerationEmbedder{Client: client, Target: embedding}
			}
			if picking != nil {
				facts = (&ask.Model{Client: client, Target: picking}).WithLimits(cfg)
			}
		}
		opts, err := memory.OptionsFromConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		opts.Embedder, opts.Facts = embedder, facts
		if d, ok := memory.DrainTimeout(cfg); ok {
			return server.WithDrainTimeout(memory.New(opts), d), nil
		}
		return memory.New(opts), nil
	})
}

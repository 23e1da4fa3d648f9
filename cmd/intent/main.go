// Command intent serves agentmesh's IntentService (agentmesh.intent.v1) with health and
// reflection. LISTEN_ADDR sets its address (default 127.0.0.1:7001), AGENTMESH_CONFIG the
// configuration file, GENERATION_ADDR the generation service that asks the intent model when
// models.intent is set (default services.generation; dialled lazily, so either may start
// first: until it answers, messages are parsed by the rules). Stopping, it takes no new call and
// lets those in flight finish: with a model, for up to intent.DrainTimeout.
package main

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/intent"
)

func main() {
	server.Main("intent", "127.0.0.1:7001", func(_ context.Context, cfg *config.Config) (server.Registrar, error) {
		var opts intent.Options
		if target := intent.ModelTarget(cfg); target != nil {
			client, err := server.DialGeneration(cfg)
			if err != nil {
				return nil, err
			}
			opts.Model = (&ask.Model{Client: client, Target: target}).WithLimits(cfg)
		}
		if d, ok := intent.DrainTimeout(cfg); ok {
			return server.WithDrainTimeout(intent.New(opts), d), nil
		}
		return intent.New(opts), nil
	})
}

// Command planning serves agentmesh's PlanningService (agentmesh.planning.v1) with health and
// reflection. LISTEN_ADDR sets its address (default 127.0.0.1:7002), AGENTMESH_CONFIG the
// configuration file, GENERATION_ADDR the generation service that asks the planning model when
// models.planning is set (default services.generation; dialled lazily, so either may start
// first: until it answers, plans are made by the rules). Stopping, it takes no new call and
// lets those in flight finish: with a model, for up to planning.DrainTimeout.
package main

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/planning"
)

func main() {
	server.Main("planning", "127.0.0.1:7002", func(_ context.Context, cfg *config.Config) (server.Registrar, error) {
		var opts planning.Options
		if t := planning.ModelTarget(cfg); t != nil {
			client, err := server.DialGeneration(cfg)
			if err != nil {
				return nil, err
			}
			opts.Model = (&ask.Model{Client: client, Target: t}).WithLimits(cfg)
		}
		if d, ok := planning.DrainTimeout(cfg); ok {
			return server.WithDrainTimeout(planning.New(opts), d), nil
		}
		return planning.New(opts), nil
	})
}

// Command planning serves agentmesh's PlanningService (agentmesh.planning.v1) with health and
// reflection. LISTEN_ADDR sets its address (default 127.0.0.1:7002).
package main

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/planning"
)

func main() {
	server.Main("planning", "127.0.0.1:7002", func(context.Context, *config.Config) (server.Registrar, error) {
		return planning.New(planning.Options{}), nil
	})
}

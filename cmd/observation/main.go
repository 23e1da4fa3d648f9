// Command observation serves agentmesh's ObservationService (agentmesh.observation.v1) with health and
// reflection. LISTEN_ADDR sets its address (default 127.0.0.1:7006).
package main

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/observation"
)

func main() {
	server.Main("observation", "127.0.0.1:7006", func(context.Context, *config.Config) (server.Registrar, error) {
		return observation.New(observation.Options{}), nil
	})
}

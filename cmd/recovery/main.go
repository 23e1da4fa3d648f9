// Command recovery serves agentmesh's RecoveryService (agentmesh.recovery.v1) with health and
// reflection. LISTEN_ADDR sets its address (default 127.0.0.1:7008).
package main

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/recovery"
)

func main() {
	server.Main("recovery", "127.0.0.1:7008", func(context.Context, *config.Config) (server.Registrar, error) {
		return recovery.New(recovery.Options{}), nil
	})
}

// Command intent serves agentmesh's IntentService (agentmesh.intent.v1) with health and
// reflection. LISTEN_ADDR sets its address (default 127.0.0.1:7001).
package main

import (
	"context"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/intent"
)

func main() {
	server.Main("intent", "127.0.0.1:7001", func(context.Context, *config.Config) (server.Registrar, error) {
		return intent.New(intent.Options{}), nil
	})
}

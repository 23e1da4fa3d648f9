// Command memory serves agentmesh's MemoryService (agentmesh.memory.v1) with health and
// reflection. LISTEN_ADDR sets its address (default :7007); AGENTMESH_CONFIG names the
// configuration file (the layered defaults otherwise).
package main

import (
	"context"
	"os"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/memory"
)

func main() {
	server.Main("memory", ":7007", func(ctx context.Context) (server.Registrar, error) {
		cfg, err := config.Load(os.Getenv("AGENTMESH_CONFIG"))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Invalid, err)
		}
		opts, err := memory.OptionsFromConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return memory.New(opts), nil
	})
}

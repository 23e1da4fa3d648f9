// Command action serves agentmesh's ActionService (agentmesh.action.v1) with health and
// reflection. LISTEN_ADDR sets its address (default :7005); MEMORY_ADDR names the memory
// service that knowledge_search reads; AGENTMESH_CONFIG names the configuration file.
package main

import (
	"context"
	"os"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/action"
)

func main() {
	server.Main("action", ":7005", func(context.Context) (server.Registrar, error) {
		cfg, err := config.Load(os.Getenv("AGENTMESH_CONFIG"))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Invalid, err)
		}
		conn, err := dial.New(server.Env("MEMORY_ADDR", cfg.Services.Memory))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		return action.New(action.Options{
			Memory:          memoryv1.NewMemoryServiceClient(conn),
			RequireApproval: cfg.Tools.RequireApproval,
			NoApproval:      cfg.Tools.NoApproval,
		})
	})
}

// Command context serves agentmesh's ContextService (agentmesh.context.v1) with health and
// reflection. LISTEN_ADDR sets its address (default 127.0.0.1:7003); MEMORY_ADDR names the memory
// service it searches; AGENTMESH_CONFIG names the configuration file.
package main

import (
	"context"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/assembly"
)

func main() {
	server.Main("context", "127.0.0.1:7003", func(_ context.Context, cfg *config.Config) (server.Registrar, error) {
		mesh, err := cfg.TLS.Mesh()
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Invalid, err)
		}
		conn, err := dial.New(server.Env("MEMORY_ADDR", cfg.Services.Memory), dial.WithMesh(mesh), dial.WithPeer("memory"), dial.WithMaxMessageBytes(cfg.GRPC.MaxMessageBytes))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		return assembly.New(assembly.Options{Memory: memoryv1.NewMemoryServiceClient(conn)}), nil
	})
}

// Command action serves agentmesh's ActionService (agentmesh.action.v1) on LISTEN_ADDR (default
// :7005), with MEMORY_ADDR for knowledge_search, NATS_URL for the call ledger, AGENTMESH_CONFIG.
// Health is NOT_SERVING while the call ledger's NATS server is unreachable: no call runs then.
// Stopping, it takes no new call and lets those in flight finish for up to action.DrainTimeout
// (the default tool timeout and 5 s; DRAIN_TIMEOUT_MS sets another).
package main

import (
	"context"
	"errors"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/action"
)

func main() {
	server.Main("action", "127.0.0.1:7005", func(ctx context.Context, cfg *config.Config) (server.Registrar, error) {
		mesh, err := cfg.TLS.Mesh()
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Invalid, err)
		}
		conn, err := dial.New(server.Env("MEMORY_ADDR", cfg.Services.Memory), dial.WithMesh(mesh), dial.WithPeer("memory"), dial.WithMaxMessageBytes(cfg.GRPC.MaxMessageBytes))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		cfg.NATS.URL = server.Env("NATS_URL", cfg.NATS.URL)
		opts, stop, err := action.OptionsFromConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		opts.Memory = memoryv1.NewMemoryServiceClient(conn)
		svc, err := action.New(opts)
		if err != nil {
			return nil, exitcode.Default(exitcode.Invalid, errors.Join(err, stop()))
		}
		return server.WithClose(server.WithDrainTimeout(svc, action.DrainTimeout(cfg)), stop), nil
	})
}

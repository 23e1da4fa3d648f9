// Command orchestrator serves agentmesh's public AgentService (agentmesh.agent.v1). LISTEN_ADDR
// sets its address (default 127.0.0.1:7000), <STAGE>_ADDR each stage's, NATS_URL the NATS server,
// AGENTMESH_CONFIG the configuration, AGENTMESH_REPLICA its unique replica name (default: host
// and pid). Health is NOT_SERVING while events cannot be stored and while it hands runs off.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
)

func main() {
	server.MainPublic("orchestrator", "127.0.0.1:7000", func(ctx context.Context, cfg *config.Config) (server.Registrar, error) {
		replica := os.Getenv("AGENTMESH_REPLICA")
		if replica != "" {
			if err := runstore.CheckReplica(replica); err != nil {
				return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("AGENTMESH_REPLICA: %w", err))
			}
		}
		nc, err := events.Connect(server.Env("NATS_URL", cfg.NATS.URL), "agentmesh-orchestrator")
		if errors.Is(err, config.ErrInvalid) { // a NATS_URL that does not parse
			return nil, exitcode.Wrap(exitcode.Invalid, err)
		} else if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		opts, closePeers, err := orchestrator.OptionsFromConfig(ctx, cfg, nc, server.Env)
		if err != nil {
			nc.Close()
			if errors.Is(err, config.ErrInvalid) { // approvals.signing_key, tls
				return nil, exitcode.Wrap(exitcode.Invalid, err)
			}
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		opts.Replica = replica
		svc, err := orchestrator.New(ctx, opts)
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		return server.WithClose(svc, func() error { nc.Close(); return closePeers() }), nil
	})
}

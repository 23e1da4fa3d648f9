// Command orchestrator serves agentmesh's public AgentService (agentmesh.agent.v1) with health
// and reflection. LISTEN_ADDR sets its address (default :7000); <STAGE>_ADDR names each stage
// (INTENT_ADDR, PLANNING_ADDR, ...); NATS_URL the NATS server; AGENTMESH_CONFIG the
// configuration file. Its health is NOT_SERVING while run events cannot be stored.
package main

import (
	"context"
	"os"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/orchestrator"
)

func main() {
	server.Main("orchestrator", ":7000", func(ctx context.Context) (server.Registrar, error) {
		cfg, err := config.Load(os.Getenv("AGENTMESH_CONFIG"))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Invalid, err)
		}
		nc, err := events.Connect(server.Env("NATS_URL", cfg.NATS.URL), "agentmesh-orchestrator")
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		peers, closePeers, err := orchestrator.DialPeers(orchestrator.PeerAddrsFromConfig(cfg, server.Env))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		svc, err := orchestrator.New(ctx, orchestrator.Options{Peers: peers, NATS: nc,
			Contract: orchestrator.ContractFromConfig(cfg), Alternatives: cfg.Tools.Alternatives})
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		pub, err := events.NewPublisher(ctx, nc, events.WithStream(events.StreamOptionsFromConfig(cfg.NATS)))
		if err != nil {
			return nil, exitcode.Wrap(exitcode.Unavailable, err)
		}
		closing := server.WithClose(svc, func() error { nc.Close(); return closePeers() })
		return server.WithHealth(closing, server.HealthFunc(pub.Ready)), nil
	})
}

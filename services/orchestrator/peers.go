package orchestrator

import (
	"errors"
	"slices"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"google.golang.org/grpc"
)

// PeerAddrs are the gRPC targets of the stage services (e.g. "dns:///planning:7002").
type PeerAddrs struct {
	Intent, Planning, Context, Generation, Action, Observation, Memory, Recovery string
}

// PeerAddrsFromConfig reads each stage's address from env (<STAGE>_ADDR, e.g. PLANNING_ADDR),
// falling back to the configuration's services section.
func PeerAddrsFromConfig(cfg *config.Config, env func(key, def string) string) PeerAddrs {
	s := cfg.Services
	return PeerAddrs{
		Intent: env("INTENT_ADDR", s.Intent), Planning: env("PLANNING_ADDR", s.Planning),
		Context: env("CONTEXT_ADDR", s.Context), Generation: env("GENERATION_ADDR", s.Generation),
		Action: env("ACTION_ADDR", s.Action), Observation: env("OBSERVATION_ADDR", s.Observation),
		Memory: env("MEMORY_ADDR", s.Memory), Recovery: env("RECOVERY_ADDR", s.Recovery),
	}
}

// DialPeers connects to every stage service. close releases the connections. With mutual TLS
// (dial.WithMesh), each stage's server must have its stage's mesh identity, or one that opts
// name (dial.WithPeer).
func DialPeers(a PeerAddrs, opts ...dial.Option) (p Peers, close func() error, err error) {
	var conns []*grpc.ClientConn
	close = func() error {
		var errs []error
		for _, c := range conns {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}
	conn := func(target string, extra ...dial.Option) *grpc.ClientConn {
		if err != nil {
			return nil
		}
		var c *grpc.ClientConn
		if c, err = dial.New(target, append(slices.Clone(opts), extra...)...); err == nil {
			conns = append(conns, c)
		}
		return c
	}
	p = Peers{
		Intent:   intentv1.NewIntentServiceClient(conn(a.Intent, dial.WithPeer("intent"))),
		Planning: planningv1.NewPlanningServiceClient(conn(a.Planning, dial.WithPeer("planning"))),
		Context:  contextv1.NewContextServiceClient(conn(a.Context, dial.WithPeer("context"))),
		// An LLM call costs money and is not idempotent: the orchestrator's attempts, each
		// accounted, are its only retries (no transparent retry of UNAVAILABLE).
		Generation: generationv1.NewGenerationServiceClient(conn(a.Generation,
			dial.WithoutRetry(), dial.WithPeer("generation"))),
		Action: actionv1.NewActionServiceClient(conn(a.Action, dial.WithPeer("action"))),
		Observation: observationv1.NewObservationServiceClient(conn(a.Observation,
			dial.WithPeer("observation"))),
		Memory:   memoryv1.NewMemoryServiceClient(conn(a.Memory, dial.WithPeer("memory"))),
		Recovery: recoveryv1.NewRecoveryServiceClient(conn(a.Recovery, dial.WithPeer("recovery"))),
	}
	if err != nil {
		_ = close()
		return Peers{}, nil, err
	}
	return p, close, nil
}

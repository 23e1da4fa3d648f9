package main

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// runsAfterRestart is how many runs, one after the other, must succeed once a restarted stage
// reports SERVING.
const runsAfterRestart = 5

// reconnectsWhileDown is how many times the orchestrator must have tried to reconnect to the
// stage that is down before it comes back: by then its connection backs off by the most it
// does (a second), and a run waiting for the stage has waited longer than gRPC's retries of
// UNAVAILABLE would have covered.
const reconnectsWhileDown = 6

// TestRestartedStageUsedAtOnce (issue 11.7): a stage killed with SIGKILL and started again is
// used again as soon as it reports SERVING, because the orchestrator's calls to the idempotent
// stages wait for a stage to be ready (up to orchestrator.StageWait) instead of failing while
// their connection reconnects. While the planning stage is down, its address refuses every
// connection, counting them; a run started then waits at PLAN until the orchestrator has
// tried reconnectsWhileDown times, and must succeed once the stage is back; so must the
// runsAfterRestart runs made one after the other as soon as it reports SERVING (they used to
// fail STAGE_UNAVAILABLE for up to the connection's backoff).
func TestRestartedStageUsedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}}) // the built-in rules model
	a, planning := m.Replica(t, "a"), m.Stage(t, "planning")
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	succeeds(ctx, t, a, "the run before the outage", &agentv1.RunRequest{Message: "What is 6 times 7?"})

	planning.Kill(t)
	down := refuse(t, planning.Addr())
	const runID = "started-while-planning-is-down"
	pending := goRun(func() (*typev1.RunResult, error) {
		return a.Agent().Run(ctx, &agentv1.RunRequest{RunId: runID, Message: "What is 6 times 7?"})
	})
	m.WaitEvent(t, runID, "intent_parsed", runTimeout) // the run is at PLAN
	if !poll(t, runTimeout, func() bool { return down.attempts() >= reconnectsWhileDown }) {
		t.Fatalf("the orchestrator tried to reach the planning stage %d times within %s, want %d", down.attempts(), runTimeout, reconnectsWhileDown)
	}
	down.stop()
	planning.Restart(t) // returns once the stage reports SERVING
	for i := range runsAfterRestart {
		succeeds(ctx, t, a, fmt.Sprintf("run %d after the restart", i+1), &agentv1.RunRequest{Message: "What is 6 times 7?"})
	}
	<-pending.done
	checkSucceeded(t, "the run started while the planning stage was down", pending.res, pending.err)
}

// succeeds runs req on replica and fails t unless the run succeeds.
func succeeds(ctx context.Context, t *testing.T, replica *meshproc.Service, what string, req *agentv1.RunRequest) {
	t.Helper()
	res, err := replica.Agent().Run(ctx, req)
	checkSucceeded(t, what, res, err)
}

// checkSucceeded fails t unless the run answered res, a success.
func checkSucceeded(t *testing.T, what string, res *typev1.RunResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !res.GetSuccess() {
		t.Fatalf("%s ended %s %s: %v", what, res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
}

// refuser stands in for a service that is down at an address: it accepts every connection and
// closes it at once, counting them, so a test can tell how often clients tried to reconnect.
type refuser struct {
	lis  net.Listener
	n    atomic.Int32
	done chan struct{}
}

// refuse listens on addr, which must be free, until stop or the end of the test.
func refuse(t *testing.T, addr string) *refuser {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	r := &refuser{lis: lis, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			r.n.Add(1)
			_ = conn.Close()
		}
	}()
	t.Cleanup(r.stop)
	return r
}

// attempts returns how many connections were refused so far.
func (r *refuser) attempts() int { return int(r.n.Load()) }

// stop stops listening and returns once the address is free.
func (r *refuser) stop() {
	_ = r.lis.Close()
	<-r.done
}

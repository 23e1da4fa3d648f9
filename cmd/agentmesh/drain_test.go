package main

import (
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The drain tests stop a stage (SIGTERM, as on every rollout or node drain) while a call of a
// run is in flight on it, and check that the call outlives the drain a service without such
// calls gets (server.DefaultDrainTimeout).

// heldTurn returns the channel a scripted model's turn waits on (llmtest.Turn.Hold) and the
// release that closes it, once however often it is called; the test's end releases it too.
func heldTurn(t *testing.T) (hold chan struct{}, release func()) {
	hold = make(chan struct{})
	release = sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release)
	return hold, release
}

// askedModel is how many requests the scripted model got for model.
func askedModel(llm *llmtest.Server, model string) int {
	n := 0
	for _, r := range llm.Requests() {
		if r.Model == model {
			n++
		}
	}
	return n
}

// stopStage sends stage SIGTERM and waits until it stops answering health checks: it closes
// its listener and sends its clients GOAWAY, so a readiness probe finds nothing to connect to.
func stopStage(t *testing.T, stage *meshproc.Service, name string) {
	t.Helper()
	stage.Signal(t, syscall.SIGTERM)
	if !poll(t, runTimeout, func() bool {
		_, err := stage.Health(t.Context())
		return status.Code(err) == codes.Unavailable
	}) {
		t.Fatalf("the %s stage still answers health checks after SIGTERM", name)
	}
}

// outlivesDrain fails the test if the stopped stage exits, or pending's run ends, within
// server.DefaultDrainTimeout and 2 s while the stage's work (inFlight: the run's call, or
// with a nil pending work of the stage's own) is held.
func outlivesDrain(t *testing.T, stage *meshproc.Service, name, inFlight string, pending *pendingRun) {
	t.Helper()
	outlives := server.DefaultDrainTimeout + 2*time.Second
	past := time.NewTimer(outlives)
	defer past.Stop()
	var ended <-chan struct{} // nil, never ready, without a run
	if pending != nil {
		ended = pending.done
	}
	select {
	case <-stage.Exited(t):
		t.Fatalf("the %s stage exited within %s of SIGTERM, with %s in flight:\n%s", name, outlives, inFlight, stage.Logs())
	case <-ended:
		t.Fatalf("the run ended while %s was held: %v, %v", inFlight, pending.res, pending.err)
	case <-past.C:
	}
}

// exitedAfterDrain fails the test unless the stopped stage exited with status 0.
func exitedAfterDrain(t *testing.T, stage *meshproc.Service, name string) {
	t.Helper()
	if err := stage.Wait(t); err != nil {
		t.Errorf("the %s stage exited with %v after its drain, want status 0", name, err)
	}
}

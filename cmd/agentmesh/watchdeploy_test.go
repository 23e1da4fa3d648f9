package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestWatchFollowsItsRunAcrossADeploy: `agentmesh watch` of a run another replica executes
// is served by replica a, which is then stopped (SIGTERM during a deploy). Its watch stream
// held a's shutdown: a handed off no run, yet its server waited its whole drain timeout for
// the watch to end, which it never does before the run ends, then cut it. A draining replica
// now ends its watches at once, UNAVAILABLE, and the CLI follows the run on through the same
// address (a relay in front of a and b, as a load balancer) after the last event it showed:
// a stops within a fraction of its drain timeout, and the watch shows the run to its end,
// each event once.
func TestWatchFollowsItsRunAcrossADeploy(t *testing.T) {
	isolate(t)
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	release := make(chan struct{})
	llm := llmtest.New(t, llmtest.Scenario{Name: "watched", Match: "watched: *", Turns: []llmtest.Turn{
		{Content: "Seen across the deploy.", Hold: release},
	}})
	const drain = 60 * time.Second
	m := meshproc.Start(t, meshproc.Options{
		Config: meshproc.Config{LLM: llm.URL()},
		Env:    []string{"DRAIN_TIMEOUT_MS=" + strconv.FormatInt(drain.Milliseconds(), 10)},
	})
	a, b := m.Replica(t, "a"), m.Replica(t, "b")
	addr := failover(t, a.Addr(), b.Addr())

	// The run executes on b; its first event says it began.
	started, err := agentv1.NewAgentServiceClient(dialService(t, b.Addr())).StreamRun(t.Context(),
		&agentv1.RunRequest{Message: "watched: across a deploy", UserId: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := started.Recv()
	if err != nil {
		t.Fatal(err)
	}
	runID := first.GetRunId()

	stderr := &firstWrite{written: make(chan struct{})}
	var stdout strings.Builder
	code := make(chan int, 1)
	go func() { code <- run(t.Context(), []string{"watch", runID, "--addr", addr}, &stdout, stderr) }()
	if !poll(t, runTimeout, func() bool { return strings.Contains(stderr.String(), "▶ run "+runID) }) {
		t.Fatalf("watch through a shows nothing:\n%s", stderr.String())
	}
	begun := time.Now()
	if err := a.Stop(t); err != nil {
		t.Errorf("replica a did not exit cleanly on SIGTERM: %v", err)
	}
	if took := time.Since(begun); took > drain/3 {
		t.Errorf("replica a took %s to stop, held by a watch (drain timeout %s)", took, drain)
	}
	close(release)

	var got int
	select {
	case got = <-code:
	case <-t.Context().Done():
		t.Fatal("watch never returned")
	}
	errOut := stderr.String()
	if got != 0 || !strings.Contains(errOut, "■ COMPLETED") {
		t.Fatalf("watch across a deploy: exit %d, want 0 and the run's end\n%s", got, errOut)
	}
	if !strings.Contains(errOut, "; following run "+runID+" on from event ") {
		t.Errorf("the progress does not say the run is followed on:\n%s", errOut)
	}
	if n := strings.Count(errOut, "▶ run "); n != 1 {
		t.Errorf("run_started shown %d times, want once:\n%s", n, errOut)
	}
}

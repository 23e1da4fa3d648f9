package mesh_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/procs"
)

// defaultProcs is GOMAXPROCS as the runtime set it, before any mesh fitted it (TestMain).
var defaultProcs int

// fittedMesh starts a mesh (durable runs, the default) whose model plays scenario, once it
// has one processor with no run in flight; it skips t where the mesh leaves the processors
// as they are: GOMAXPROCS set in the environment, or one CPU.
func fittedMesh(t *testing.T, scenario llmtest.Scenario) *harness {
	t.Helper()
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set in the environment: the mesh leaves it as it is")
	}
	if defaultProcs < 2 {
		t.Skip("one CPU: there is nothing to fit")
	}
	h := start(t, config.Default(), scenario)
	if !eventually(t, 10*time.Second, func() bool { return runtime.GOMAXPROCS(0) == 1 }) {
		t.Fatalf("no run in flight: GOMAXPROCS %d, want 1", runtime.GOMAXPROCS(0))
	}
	return h
}

// TestTheProcessorsFollowTheRunsInFlight: the mesh in one process has one processor while at
// most one run is in flight, the runtime's default as soon as a second one starts, and one
// again once the runs have ended (pkg/procs). It runs alone (not in parallel), so the runs in
// flight in the process are its own.
func TestTheProcessorsFollowTheRunsInFlight(t *testing.T) {
	hold := make(chan struct{})
	h := fittedMesh(t, llmtest.Scenario{Name: "held", Match: "held", Turns: []llmtest.Turn{{Content: "done", Hold: hold}}})
	before := procs.InFlight()
	results := make(chan *typev1.RunResult, 2)
	run := func() {
		res, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "held"})
		if err != nil {
			t.Error(err)
		}
		results <- res
	}
	go run()
	if !eventually(t, 10*time.Second, func() bool { return procs.InFlight() == before+1 }) {
		t.Fatalf("one run started: %d in flight, want %d", procs.InFlight(), before+1)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("one run in flight: GOMAXPROCS %d, want 1", got)
	}
	go run()
	if !eventually(t, 10*time.Second, func() bool { return procs.InFlight() == before+2 }) {
		t.Fatalf("two runs started: %d in flight, want %d", procs.InFlight(), before+2)
	}
	if got := runtime.GOMAXPROCS(0); got != defaultProcs {
		t.Errorf("two runs in flight: GOMAXPROCS %d, want the default %d at once", got, defaultProcs)
	}
	close(hold)
	for range 2 {
		if res := <-results; res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
			t.Errorf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
		}
	}
	if got := procs.InFlight(); got != before {
		t.Errorf("both runs answered: %d in flight, want %d", got, before)
	}
	if !eventually(t, 10*time.Second, func() bool { return runtime.GOMAXPROCS(0) == 1 }) {
		t.Errorf("the runs ended %v ago: GOMAXPROCS %d, want 1", 10*time.Second, runtime.GOMAXPROCS(0))
	}
}

// TestRunsOneAfterAnotherKeepOneProcessor: runs made one after another, each as soon as the
// last one's answer is in, unary or streamed, never count two in flight, so the process
// keeps one processor (a second run in flight would give it the default for a second).
func TestRunsOneAfterAnotherKeepOneProcessor(t *testing.T) {
	h := fittedMesh(t, llmtest.Scenario{Name: "hi", Match: "Say hi", Turns: []llmtest.Turn{{Content: "hi"}}})
	for i := range 10 {
		if i%2 == 0 {
			if _, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "Say hi"}); err != nil {
				t.Fatal(err)
			}
		} else {
			stream, err := h.client.StreamRun(t.Context(), &agentv1.RunRequest{Message: "Say hi"})
			if err != nil {
				t.Fatal(err)
			}
			if evs := received(t, stream); len(evs) == 0 || evs[len(evs)-1].GetRunFinished() == nil {
				t.Fatalf("the stream ended without run_finished after %d events", len(evs))
			}
		}
		if got := runtime.GOMAXPROCS(0); got != 1 {
			t.Fatalf("after run %d of runs made one after another: GOMAXPROCS %d, want 1", i+1, got)
		}
	}
}

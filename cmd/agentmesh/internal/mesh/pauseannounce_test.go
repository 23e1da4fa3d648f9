package mesh_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
)

// TestAPauseReachedWhileDrainingIsAnnounced: a run whose next checkpoint, once its replica
// began to drain, is the one that pauses it for its user's answer is handed off at its pause.
// The draining replica announces the pause before it hands the run off (input_requested
// before run_resumed), and the replica that takes it over does not announce it again. It
// used to stop at the pause's checkpoint, before announcing: whoever followed the run's events
// (agentmesh run and watch follow a run that moved) waited for the question, never shown,
// until answer_timeout_ms ended the run, or until a replica took the run over.
func TestAPauseReachedWhileDrainingIsAnnounced(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(strings.Repeat("row\n", 75)))
	}))
	t.Cleanup(tools.Close)
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)

	const message, runID = "Export it all, during a deploy.", "asked-while-draining"
	h := askMesh(t, 2, func(cfg *config.Config) {
		cfg.RestTools = map[string]config.RestTool{"export": {
			Description: "Exports every record.", URL: tools.URL + "/export"}}
	}, exportScenario(message, "Skipped."))
	a, b := h.replicas[0], h.replicas[1]
	ctx := t.Context()

	started := make(chan error, 1)
	go func() {
		_, err := a.Run(ctx, &agentv1.RunRequest{Message: message, RunId: runID})
		started <- err
	}()
	select {
	case <-arrived:
	case err := <-started:
		t.Fatalf("the run ended before its tool ran: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the tool was never called")
	}

	var stopped sync.WaitGroup
	defer stopped.Wait()
	stopped.Go(func() { h.mesh.StopOrchestrator(context.WithoutCancel(ctx), 0) })
	replicas := h.bucket(t, runstore.ReplicaBucket)
	if !eventually(t, 10*time.Second, func() bool {
		_, err := replicas.Get(ctx, "orchestrator-1/draining")
		return err == nil
	}) {
		t.Fatal("orchestrator-1 never began to drain")
	}
	unblock() // the tool's answer is too large: recovery asks the user, on the draining replica
	<-started

	if resumed := h.awaitResumed(t, runID, 20*time.Second); resumed.GetPhase() != "awaiting_input" {
		t.Fatalf("run_resumed = %v, want the run resumed at its pause for an answer", resumed)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	watch, err := b.WatchRun(wctx, &agentv1.WatchRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("the run's events %v never announced its question: %v", kinds, err)
		}
		kinds = append(kinds, events.Kind(ev))
		if q := ev.GetInputRequested(); q != nil {
			if q.GetQuestion().GetQuestion() != tooMuch {
				t.Fatalf("input_requested = %v, want the question %q", q, tooMuch)
			}
			break
		}
	}
	resp, err := b.Answer(ctx, &agentv1.AnswerRequest{RunId: runID, Answer: "Skip it."})
	if err != nil || !resp.GetResumed() {
		t.Fatalf("Answer = %v, %v", resp, err)
	}
	_, kinds = finishOn(t, b, runID)
	if count(kinds, "input_requested") != 1 || count(kinds, "run_resumed") != 1 ||
		count(kinds, "run_finished") != 1 {
		t.Errorf("events %v, want the question announced once, resumed once, finished once",
			kinds)
	}
	asked, resumed := slices.Index(kinds, "input_requested"), slices.Index(kinds, "run_resumed")
	if asked > resumed {
		t.Errorf("events %v, want the question announced by the draining replica, "+
			"before the run resumed", kinds)
	}
}

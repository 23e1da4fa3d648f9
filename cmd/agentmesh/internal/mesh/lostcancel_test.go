package mesh_test

import (
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// openRunStore opens the harness's run store, as another replica does.
func openRunStore(t *testing.T, h *harness) *runstore.Store {
	t.Helper()
	store, err := runstore.Open(t.Context(), h.mesh.NATS(), runstore.Config{Replicas: 1,
		Storage: jetstream.FileStorage, LeaseTTL: 10 * time.Second, IdempotencyTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	return store
}

// wantCancelled checks that err is the FAILED_PRECONDITION of an input that lost to the run's
// cancellation, and that the run ended INTERRUPTED without it (no event of kind taken).
func wantCancelled(t *testing.T, h *harness, runID, taken string, err error) {
	t.Helper()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("the retried input after a cancellation = %v; want FAILED_PRECONDITION, "+
			"cancelled", err)
	}
	final, kinds := h.finish(t, runID)
	if final.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED || count(kinds, taken) != 0 {
		t.Errorf("outcome %s, events %v; want INTERRUPTED without %s", final.GetOutcome(), kinds,
			taken)
	}
}

// TestAnInputRecordedAfterTheCancellationIsNotTheRuns: Answer and ResolveApproval read that
// the run is not being cancelled, then record the input; a CancelRun recorded between the
// two ends the run without the input, which it takes from the store after the cancellation.
// The window cannot be held open through the API, so the test writes what the two calls
// write in that order (the cancellation, then the input) and retries the input through the
// API, as a caller told UNAVAILABLE does: it was told resumed, for an input the run never
// took. The store now orders the input against the cancellation when it records it, and the
// run takes no input recorded after its cancellation.
func TestAnInputRecordedAfterTheCancellationIsNotTheRuns(t *testing.T) {
	t.Run("answer", func(t *testing.T) {
		const message, answer = "Export it, then cancel.", "Skip it."
		h := askMesh(t, 1, nil, exportScenario(message, "Skipped."))
		res := h.run(t, &agentv1.RunRequest{Message: message})
		req := &agentv1.AnswerRequest{RunId: res.GetRunId(), QuestionId: asking(t, res),
			Answer: answer}
		store := openRunStore(t, h)
		cancel := &agentv1.CancelRunRequest{RunId: res.GetRunId(), Reason: "stop"}
		if err := store.RequestCancel(t.Context(), cancel, ""); err != nil {
			t.Fatal(err)
		}
		_ = store.Answer(t.Context(), req, "") // the answer whose check came before the cancel
		_, err := h.client.Answer(t.Context(), req)
		wantCancelled(t, h, res.GetRunId(), "input_answered", err)
	})
	t.Run("decision", func(t *testing.T) {
		cfg := config.Default()
		cfg.Tools.RequireApproval = []string{"calculator"}
		const message = "Add, then cancel."
		h := start(t, cfg, llmtest.Scenario{Name: "cancelled", Match: message,
			Turns: []llmtest.Turn{calcTurn("c1", "1+1"), text("2")}})
		res := h.run(t, &agentv1.RunRequest{Message: message})
		paused(t, res, "c1")
		req := &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}
		store := openRunStore(t, h)
		cancel := &agentv1.CancelRunRequest{RunId: res.GetRunId(), Reason: "stop"}
		if err := store.RequestCancel(t.Context(), cancel, ""); err != nil {
			t.Fatal(err)
		}
		_ = store.Decide(t.Context(), req, "") // the decision whose check came before the cancel
		_, err := h.client.ResolveApproval(t.Context(), req)
		wantCancelled(t, h, res.GetRunId(), "approval_resolved", err)
	})
}

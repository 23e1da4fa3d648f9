package orchestrator

import (
	"context"
	"log/slog"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// TestAnExpiredQuestionIsClosedOutsideTheRunsContext: a question that expires at the run's
// deadline is closed when the run's context has ended with it. The close was made in that
// context, and failed: the question stayed open for answers the run never took, and an answer
// recorded just before, which the store's watch had not handed to the run yet, was waited
// for in that context, and lost, though its caller was told the run resumed with it. The
// close now has a context of its own, and reads such an answer back from the store.
func TestAnExpiredQuestionIsClosedOutsideTheRunsContext(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // the last cleanup: once NATS and the store close
	nc := natstest.Connect(t)
	store, err := runstore.Open(t.Context(), nc, runstore.Config{
		Replicas: 1, Storage: jetstream.FileStorage,
		LeaseTTL: time.Minute, IdempotencyTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	s := &Service{store: store, log: slog.New(slog.DiscardHandler), abandon: context.Background()}
	asking := func(runID string) (*run, *questionState) {
		t.Helper()
		cp := &checkpointv1.RunCheckpoint{
			RunId: runID, Phase: checkpointv1.Phase_PHASE_AWAITING_INPUT,
			Request: &agentv1.RunRequest{RunId: runID},
		}
		if _, err := store.Create(t.Context(), cp); err != nil {
			t.Fatal(err)
		}
		st := &questionState{pending: &typev1.PendingQuestion{RunId: runID, Id: "turn-1"}}
		return &run{svc: s, id: runID, inputs: newInbox()}, st
	}
	ended, end := context.WithCancelCause(t.Context())
	end(errTotalTimeout) // the run's context, ended by its deadline

	r, st := asking("run-answered")
	answer := &agentv1.AnswerRequest{RunId: r.id, QuestionId: "turn-1", Answer: "Skip it."}
	if err := store.Answer(t.Context(), answer, "tenant-1/ann"); err != nil {
		t.Fatal(err)
	}
	got, by := r.closeQuestion(ended, st)
	if got.GetAnswer() != "Skip it." || by != "tenant-1/ann" {
		t.Errorf("closing a question answered before = %v by %q; want the answer, by tenant-1/ann",
			got, by)
	}

	r, st = asking("run-unanswered")
	if got, _ = r.closeQuestion(ended, st); got != nil {
		t.Errorf("closing a question nobody answered = %v, want none", got)
	}
	in, err := store.Answered(t.Context(), r.id, "turn-1")
	if err != nil || in.Answer == nil || in.Answer.GetAnswer() != "" {
		t.Errorf("recorded for the question: %v, %v; want its closing record (an empty answer)",
			in.Answer, err)
	}
}

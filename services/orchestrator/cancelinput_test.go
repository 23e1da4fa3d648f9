package orchestrator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// cancelRounds is how many times TestInputQueuedBeforeACancelIsTaken waits with an input and
// a cancellation both there: each wait chose between them at random, so one took the input
// half the time, and all of them about once in a million.
const cancelRounds = 20

// TestInputQueuedBeforeACancelIsTaken: an answer, or an approval decision, that the run's
// input watch queued before a CancelRun reached the run is taken by the wait that the
// cancellation ends: recorded in the transcript (and the answer in the conversation), since
// Answer and ResolveApproval told its caller the run has it (resumed). The wait chose between
// the queued input and the cancellation at random, and half the time ended without the input,
// which stayed in the inbox, unrecorded.
func TestInputQueuedBeforeACancelIsTaken(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // the last cleanup: once NATS closes
	pub, err := events.NewPublisher(t.Context(), natstest.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{log: slog.New(slog.DiscardHandler), tracer: noop.NewTracerProvider().Tracer(""),
		publisher: pub, abandon: context.Background(), now: time.Now}
	cancelled, cancel := context.WithCancelCause(t.Context())
	cancel(cancelCause("", "tenant-1/ann"))
	expires := timestamppb.New(time.Now().Add(time.Hour))
	newRun := func(id string, in runstore.Input) *run {
		r := &run{svc: s, id: id, inputs: newInbox(), changed: make(chan struct{}),
			contract: DefaultContract(), chain: transcript.NewChain(AdapterVersion, ""),
			stream: pub.Run(id)}
		r.inputs.put(in)
		return r
	}
	recorded := func(r *run, detail string) bool {
		return slices.ContainsFunc(r.chain.Entries(), func(e *typev1.TranscriptEntry) bool {
			return e.GetDetail() == detail
		})
	}

	t.Run("answer", func(t *testing.T) {
		for i := range cancelRounds {
			id := fmt.Sprintf("asked-%d", i)
			answer := &agentv1.AnswerRequest{RunId: id, QuestionId: "turn-1", Answer: "Skip it."}
			r := newRun(id, runstore.Input{Answer: answer, By: "tenant-1/bob"})
			r.asking = &questionState{pending: &typev1.PendingQuestion{RunId: id, Id: "turn-1",
				Question: "How would you like me to proceed?", ExpiresAt: expires}}
			if end := r.awaitAnswer(cancelled, &turnState{}); end != nil {
				t.Fatalf("round %d: the cancelled wait ended the run %v; COMMIT ends it", i, end)
			}
			if !recorded(r, "answered turn-1 by tenant-1/bob") ||
				len(r.conversation) != 1 || r.conversation[0].GetContent() != "Skip it." {
				t.Fatalf("round %d: the answer queued before the cancellation is not the run's: "+
					"conversation %v", i, r.conversation)
			}
		}
	})

	t.Run("decision", func(t *testing.T) {
		for i := range cancelRounds {
			id := fmt.Sprintf("paused-%d", i)
			decision := &agentv1.ResolveApprovalRequest{RunId: id, CallId: "call-1",
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}
			r := newRun(id, runstore.Input{Decision: decision, By: "tenant-1/bob"})
			st := &approvalState{pending: &typev1.PendingAction{RunId: id, ExpiresAt: expires,
				ToolCalls: []*typev1.ToolCall{{Id: "call-1", Name: "write_file"}}},
				decisions: map[string]*agentv1.ResolveApprovalRequest{},
				resolved:  make(chan struct{})}
			end, stopped := r.waitDecisions(cancelled, st, func() *ending { return nil })
			if end != nil || stopped {
				t.Fatalf("round %d: the cancelled wait returned %v, stopped %v", i, end, stopped)
			}
			taken := st.decisions["call-1"] == decision
			if !taken || !recorded(r, "approve call-1 by tenant-1/bob") {
				t.Fatalf("round %d: the decision queued before the cancellation is not the run's: "+
					"decisions %v, transcript %v", i, st.decisions, r.chain.Entries())
			}
		}
	})
}

package mesh_test

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc"
)

// TestAPausedRunGoesOnAsAStreamedOne: a unary Run executes its run on the call's own goroutine
// and, at the run's first pause, answers with the snapshot while the run goes on from the
// pause on another goroutine; a StreamRun's run executes on a goroutine of its own throughout.
// For each kind of pause (a tool call's approval, the plan's approval and then a call's, the
// user's answer to a question about the intent, before the plan, or in a turn) the two make
// the same run: the same transcript states and the
// same events, in the same order, and the same outcome.
func TestAPausedRunGoesOnAsAStreamedOne(t *testing.T) {
	approve := func(callID string) func(t *testing.T, h *harness, runID string) {
		return func(t *testing.T, h *harness, runID string) {
			h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: runID, CallId: callID, Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
		}
	}
	approvals := config.Default()
	approvals.Tools.RequireApproval = []string{"calculator"}
	plans := config.Default()
	plans.Tools.RequireApproval = []string{"calculator"}
	plans.Tools.ApprovePlans = true
	const asked = "Export everything"
	for _, tc := range []struct {
		name    string
		mesh    func(t *testing.T) *harness
		message string
		// decide settles the run's pauses, the first of which the run has reached.
		decide func(t *testing.T, h *harness, runID string)
	}{
		{"tool approval", func(t *testing.T) *harness {
			return start(t, approvals, llmtest.Scenario{Name: "calc", Match: "What is 6 times 7?", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
		}, "What is 6 times 7?", approve("c1")},
		{"plan approval", func(t *testing.T) *harness {
			return start(t, plans, llmtest.Scenario{Name: "calc", Match: "What is 6 times 7?", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
		}, "What is 6 times 7?", func(t *testing.T, h *harness, runID string) {
			approve(orchestrator.PlanCallID)(t, h, runID)
			pausedOn(t, h.client, runID, "c1") // the call's own approval, on the run's own goroutine
			approve("c1")(t, h, runID)
		}},
		{"unclear intent", func(t *testing.T) *harness {
			return askMesh(t, 1, nil, llmtest.Scenario{Name: "unclear", Match: "???", Turns: []llmtest.Turn{
				text("never asked: the question is the first assistant message"), call("calculator", `{"expression":"6*7"}`), text("42."),
			}})
		}, "???", func(t *testing.T, h *harness, runID string) {
			if _, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: runID, Answer: "What is 6 times 7?"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"question", func(t *testing.T) *harness {
			return askMesh(t, 1, nil, exportScenario(asked, "Exported the first rows."))
		}, asked, func(t *testing.T, h *harness, runID string) {
			if _, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: runID, Answer: "Just the first rows."}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.mesh(t)
			// The unary run streams its answers as StreamRun's does, so both make the same events.
			o := &agentv1.RunOverrides{}
			streamAnswers(o)
			res := h.run(t, &agentv1.RunRequest{Message: tc.message, Overrides: o})
			if o := res.GetOutcome(); o != typev1.Outcome_OUTCOME_AWAITING_APPROVAL && o != typev1.Outcome_OUTCOME_AWAITING_INPUT {
				t.Fatalf("Run answered %s %s, want a pause", o, res.GetExitReason())
			}
			tc.decide(t, h, res.GetRunId())
			unary, unaryKinds := h.finish(t, res.GetRunId())

			streamed := streamToPause(t, h, tc.message)
			tc.decide(t, h, streamed)
			stream, streamKinds := h.finish(t, streamed)

			if unary.GetOutcome() != stream.GetOutcome() || unary.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
				t.Errorf("outcomes %s (Run) and %s (StreamRun), want both COMPLETED_WITH_TOOLS", unary.GetOutcome(), stream.GetOutcome())
			}
			if a, b := states(unary.GetTranscript()), states(stream.GetTranscript()); !slices.Equal(a, b) {
				t.Errorf("transcripts differ:\nRun       %s\nStreamRun %s", strings.Join(a, " "), strings.Join(b, " "))
			}
			if !slices.Equal(unaryKinds, streamKinds) {
				t.Errorf("events differ:\nRun       %s\nStreamRun %s", strings.Join(unaryKinds, " "), strings.Join(streamKinds, " "))
			}
			checkInvariants(t, unary)
		})
	}
}

// streamToPause starts a run of message with StreamRun, reads its events up to its pause (the
// stream's last event) and returns its id.
func streamToPause(t *testing.T, h *harness, message string) string {
	t.Helper()
	stream, err := h.client.StreamRun(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil {
		t.Fatal(err)
	}
	evs := received(t, stream)
	if len(evs) == 0 {
		t.Fatal("StreamRun ended without an event")
	}
	last := evs[len(evs)-1]
	if k := events.Kind(last); k != "approval_requested" && k != "input_requested" {
		t.Fatalf("StreamRun ended with %s, want a pause", k)
	}
	return last.GetRunId()
}

// received reads stream to its end and returns its events; an error other than the end
// fails t.
func received(t *testing.T, stream grpc.ServerStreamingClient[eventv1.RunEvent]) []*eventv1.RunEvent {
	t.Helper()
	var evs []*eventv1.RunEvent
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
}

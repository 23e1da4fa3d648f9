package events

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// threeMB is larger than three NATS messages at the default 1 MB limit.
const threeMB = 3 << 20

// marker matches the end of a cut text and captures how many bytes were cut.
var marker = regexp.MustCompile(`…\[truncated (\d+) bytes; read the whole run with GetRun\]$`)

// bigResult is a finished run's result whose conversation holds size bytes.
func bigResult(size int) *typev1.RunResult {
	return &typev1.RunResult{
		RunId: "run-big", Outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, ExitReason: "COMPLETED", Success: true,
		FinalReport: &typev1.FinalReport{Status: typev1.ReportStatus_REPORT_STATUS_SUCCESS, Content: "the answer"},
		Conversation: []*typev1.Message{
			{Role: typev1.Role_ROLE_USER, Content: "read the file"},
			{Role: typev1.Role_ROLE_TOOL, Content: strings.Repeat("x", size)},
		},
		Error:   &typev1.RunError{Code: "none", Message: "no error"},
		TraceId: "0af7651916cd43dd8448eb211c80319c", Turns: 3, ToolCalls: 2,
		Usage: &typev1.TokenUsage{Input: 1000, Output: 200},
	}
}

func finished(r *typev1.RunResult) *eventv1.RunEvent {
	return &eventv1.RunEvent{RunId: "run-big", Seq: 9, Kind: &eventv1.RunEvent_RunFinished{RunFinished: &eventv1.RunFinished{
		Result: r, Outcome: r.GetOutcome(),
	}}}
}

func observation(s string) *eventv1.RunEvent {
	ev := toolFinished("read_file")
	ev.RunId, ev.Seq = "run-big", 4
	ev.GetToolFinished().Observation = s
	return ev
}

// assertCut fails unless got is want cut with a marker that counts the bytes missing.
func assertCut(t *testing.T, got, want string) {
	t.Helper()
	m := marker.FindStringSubmatchIndex(got)
	if m == nil {
		t.Fatalf("text of %d bytes does not end with the truncation marker: …%q", len(got), got[max(len(got)-80, 0):])
	}
	kept := got[:m[0]]
	cut, _ := strconv.Atoi(got[m[2]:m[3]])
	if !strings.HasPrefix(want, kept) || len(kept)+cut != len(want) {
		t.Errorf("kept %d bytes and counted %d cut, want a prefix of the %d-byte text and the rest counted", len(kept), cut, len(want))
	}
}

func TestOmitResultKeepsTheSummary(t *testing.T) {
	full := finished(bigResult(10))
	got := OmitResult(full)
	want := proto.CloneOf(full.GetRunFinished().GetResult())
	want.Conversation = nil
	if !got.GetRunFinished().GetResultOmitted() || !proto.Equal(got.GetRunFinished().GetResult(), want) {
		t.Errorf("OmitResult = %v, want the result without its conversation and result_omitted", got)
	}
	if got.GetRunId() != full.GetRunId() || got.GetSeq() != full.GetSeq() || got.GetRunFinished().GetOutcome() != full.GetRunFinished().GetOutcome() {
		t.Errorf("OmitResult changed the event's run, seq or outcome: %v", got)
	}
	if len(full.GetRunFinished().GetResult().GetConversation()) != 2 || full.GetRunFinished().GetResultOmitted() {
		t.Error("OmitResult modified its argument")
	}
	other := observation("ok")
	if OmitResult(other) != other {
		t.Error("OmitResult of a tool_finished event is not the event itself")
	}
}

func TestFit(t *testing.T) {
	const limit = 1 << 20
	huge := strings.Repeat("ü", threeMB/2) // two bytes a rune: a cut must not split one
	tests := []struct {
		name  string
		ev    *eventv1.RunEvent
		check func(t *testing.T, got *eventv1.RunEvent)
	}{
		{"a small event is left as it is", observation("ok"), func(t *testing.T, got *eventv1.RunEvent) {
			if !proto.Equal(got, observation("ok")) {
				t.Errorf("fit changed a small event: %v", got)
			}
		}},
		{"run_finished carries its summary", finished(bigResult(threeMB)), func(t *testing.T, got *eventv1.RunEvent) {
			if want := OmitResult(finished(bigResult(threeMB))); !proto.Equal(got, want) {
				t.Errorf("fit(3 MB run_finished) = %.300v, want its summary", got)
			}
		}},
		{"a summary too large has its report cut", finished(&typev1.RunResult{
			Outcome:     typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY,
			FinalReport: &typev1.FinalReport{Content: huge},
			Error:       &typev1.RunError{Message: "kept"},
		}), func(t *testing.T, got *eventv1.RunEvent) {
			rf := got.GetRunFinished()
			if !rf.GetResultOmitted() || rf.GetResult().GetError().GetMessage() != "kept" {
				t.Errorf("fit = %.300v, want result_omitted and the error kept", rf)
			}
			assertCut(t, rf.GetResult().GetFinalReport().GetContent(), huge)
		}},
		{"a tool observation is cut", observation(huge), func(t *testing.T, got *eventv1.RunEvent) {
			assertCut(t, got.GetToolFinished().GetObservation(), huge)
			if got.GetToolFinished().GetCallId() != "call-1" || got.GetToolFinished().GetToolName() != "read_file" {
				t.Errorf("fit lost the call's id or name: %.200v", got)
			}
		}},
		{"the longest of several texts is cut first", &eventv1.RunEvent{RunId: "run-big", Seq: 2, Kind: &eventv1.RunEvent_LlmResponse{LlmResponse: &eventv1.LlmResponse{
			Message: &typev1.Message{Content: strings.Repeat("c", 800_000), Reasoning: strings.Repeat("r", 2_000_000)},
		}}}, func(t *testing.T, got *eventv1.RunEvent) {
			m := got.GetLlmResponse().GetMessage()
			if m.GetContent() != strings.Repeat("c", 800_000) {
				t.Errorf("the content (%d bytes) was cut although cutting the reasoning was enough", len(m.GetContent()))
			}
			assertCut(t, m.GetReasoning(), strings.Repeat("r", 2_000_000))
		}},
		{"many small texts: the largest field is cleared", &eventv1.RunEvent{RunId: "run-big", Seq: 3, Kind: &eventv1.RunEvent_PlanCreated{PlanCreated: &eventv1.PlanCreated{
			Steps: manySteps(15_000), RequiresHumanApproval: true,
		}}}, func(t *testing.T, got *eventv1.RunEvent) {
			if pc := got.GetPlanCreated(); len(pc.GetSteps()) != 0 || !pc.GetRequiresHumanApproval() {
				t.Errorf("fit = %d steps, approval %v; want the steps cleared and the flag kept", len(pc.GetSteps()), pc.GetRequiresHumanApproval())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := proto.CloneOf(tt.ev)
			got, err := fit(tt.ev, limit)
			if err != nil {
				t.Fatal(err)
			}
			if size := proto.Size(got); size > limit {
				t.Errorf("fit returned %d bytes, over the limit of %d", size, limit)
			}
			if !proto.Equal(tt.ev, before) {
				t.Error("fit modified its argument")
			}
			if got.GetRunId() != tt.ev.GetRunId() || got.GetSeq() != tt.ev.GetSeq() || Kind(got) != Kind(tt.ev) {
				t.Errorf("fit changed the run, seq or kind: %s %d %s", got.GetRunId(), got.GetSeq(), Kind(got))
			}
			tt.check(t, got)
		})
	}
}

func manySteps(n int) []*typev1.Step {
	steps := make([]*typev1.Step, n)
	for i := range steps {
		steps[i] = &typev1.Step{Description: fmt.Sprintf("step %d: %s", i, strings.Repeat("d", minCut-20))}
	}
	return steps
}

func TestFitFailsWhenEvenTheBareEventIsTooLarge(t *testing.T) {
	ev := observation(strings.Repeat("o", 1000))
	if _, err := fit(ev, 5); err == nil || !strings.Contains(err.Error(), "at most 5 fit") {
		t.Fatalf("fit(limit 5) = %v, want an error", err)
	}
}

func TestOversizedEventsAreStoredCutDown(t *testing.T) {
	env := newTestEnv(t)
	if max := env.nc.MaxPayload(); max != 1<<20 {
		t.Fatalf("server payload limit = %d, want the 1 MB default", max)
	}
	rs := env.pub.Run("run-big")
	full := finished(bigResult(threeMB))
	huge := strings.Repeat("o", threeMB)
	emitted := emitAll(t, rs, runStarted("go"), observation(huge), full)

	if got := emitted[1].GetToolFinished().GetObservation(); len(got) >= len(huge) {
		t.Fatalf("Emit returned an observation of %d bytes, want it cut", len(got))
	}
	assertCut(t, emitted[1].GetToolFinished().GetObservation(), huge)
	if rf := emitted[2].GetRunFinished(); !rf.GetResultOmitted() || len(rf.GetResult().GetConversation()) != 0 ||
		rf.GetResult().GetFinalReport().GetContent() != "the answer" || rf.GetResult().GetTurns() != 3 {
		t.Fatalf("Emit returned run_finished %.300v, want the summary with result_omitted", rf)
	}

	var watched []*eventv1.RunEvent
	if err := Watch(t.Context(), env.js, "run-big", 0, func(_ context.Context, ev *eventv1.RunEvent) error {
		watched = append(watched, ev)
		return nil
	}); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	assertEvents(t, watched, emitted)
}

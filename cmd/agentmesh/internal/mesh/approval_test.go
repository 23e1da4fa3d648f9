package mesh_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// approvalMesh is a mesh where calculator and current_time need approval.
func approvalMesh(t *testing.T, scenarios ...llmtest.Scenario) *harness {
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator", "current_time"}
	return start(t, cfg, scenarios...)
}

// finish follows a resumed run to its end through WatchRun and returns its result and event kinds.
func (h *harness) finish(t *testing.T, runID string) (*typev1.RunResult, []string) {
	t.Helper()
	return finishOn(t, h.client, runID)
}

// finishOn is finish through the given orchestrator replica.
func finishOn(t *testing.T, client agentv1.AgentServiceClient, runID string) (*typev1.RunResult, []string) {
	t.Helper()
	stream, err := client.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			t.Fatalf("watch ended without run_finished: %v", kinds)
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, events.Kind(ev))
		if f := ev.GetRunFinished(); f != nil {
			checkReported(t, f.GetResult())
			return f.GetResult(), kinds
		}
	}
}

func (h *harness) resolve(t *testing.T, req *agentv1.ResolveApprovalRequest) *agentv1.ResolveApprovalResponse {
	t.Helper()
	resp, err := h.client.ResolveApproval(t.Context(), req)
	if err != nil {
		t.Fatalf("ResolveApproval(%v): %v", req, err)
	}
	return resp
}

func paused(t *testing.T, res *typev1.RunResult, calls ...string) {
	t.Helper()
	if res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL || res.GetExitReason() != "APPROVAL_REQUIRED" || res.GetSuccess() {
		t.Fatalf("outcome %s %s, want a pause", res.GetOutcome(), res.GetExitReason())
	}
	var got []string
	for _, c := range res.GetPendingAction().GetToolCalls() {
		got = append(got, c.GetId())
	}
	if !slices.Equal(got, calls) || res.GetPendingAction().GetExpiresAt() == nil {
		t.Fatalf("pending %v, want %v", res.GetPendingAction(), calls)
	}
	if d := res.GetDecision(); d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_REQUEST_CONFIRMATION || len(d.GetToolCalls()) != len(calls) {
		t.Errorf("decision %v", d)
	}
}

func calcTurn(id, expr string) llmtest.Turn {
	return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: id, Name: "calculator", Arguments: `{"expression":"` + expr + `"}`}}}
}

func TestApprovalDecisions(t *testing.T) {
	h := approvalMesh(t,
		llmtest.Scenario{Name: "approve", Match: "approve it", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}},
		llmtest.Scenario{Name: "reject", Match: "reject it", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("ok, I won't")}},
		llmtest.Scenario{Name: "modify", Match: "modify it", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("4")}},
	)
	tests := []struct {
		message  string
		decision *agentv1.ResolveApprovalRequest
		outcome  typev1.Outcome
		tool     string
	}{
		{"approve it", &agentv1.ResolveApprovalRequest{Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE},
			typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "42"},
		{"reject it", &agentv1.ResolveApprovalRequest{Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, Feedback: "not now"},
			typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "(tool failed: rejected by the user: not now)"},
		{"modify it", &agentv1.ResolveApprovalRequest{Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY,
			ModifiedArguments: mustStruct(t, map[string]any{"expression": "2+2"})},
			typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "[arguments modified by the user: {\"expression\":\"2+2\"}]\n4"},
	}
	for _, tc := range tests {
		t.Run(tc.message, func(t *testing.T) {
			res := h.run(t, &agentv1.RunRequest{Message: tc.message})
			paused(t, res, "c1")
			// GetRun shows the pause too.
			if got, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()}); err != nil || got.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
				t.Errorf("GetRun(paused) = %v, %v", got.GetOutcome(), err)
			}
			tc.decision.RunId, tc.decision.CallId = res.GetRunId(), "c1"
			if resp := h.resolve(t, tc.decision); !resp.GetResumed() || len(resp.GetPendingCallIds()) != 0 {
				t.Errorf("resolve = %v", resp)
			}
			final, kinds := h.finish(t, res.GetRunId())
			if final.GetOutcome() != tc.outcome {
				t.Fatalf("outcome %s %s, want %s", final.GetOutcome(), final.GetExitReason(), tc.outcome)
			}
			if got := toolMessage(t, final, 0); !strings.Contains(got, tc.tool) {
				t.Errorf("tool message %q lacks %q", got, tc.tool)
			}
			for _, k := range []string{"approval_requested", "approval_resolved", "run_finished"} {
				if count(kinds, k) != 1 {
					t.Errorf("%d %s events in %v", count(kinds, k), k, kinds)
				}
			}
			awaits := 0
			for _, e := range final.GetTranscript() {
				if e.GetState() == typev1.RunState_RUN_STATE_AWAIT_APPROVAL {
					awaits++
				}
			}
			if awaits != 2 {
				t.Errorf("%d AWAIT_APPROVAL transcript entries, want the pause and the decision", awaits)
			}
			checkInvariants(t, final)
		})
	}
}

// TestModifiedArgumentsTheToolRefuses: a decision to modify a paused call with arguments its
// tool's input schema refuses is INVALID_ARGUMENT, naming what is wrong, and the call waits on
// for a decision. The decision used to be accepted (resumed: true), and the action stage then
// refused the arguments: the approver never knew, and the model saw a tool failure.
func TestModifiedArgumentsTheToolRefuses(t *testing.T) {
	h := approvalMesh(t, llmtest.Scenario{Name: "modify badly", Match: "modify it badly", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("4")}})
	res := h.run(t, &agentv1.RunRequest{Message: "modify it badly"})
	paused(t, res, "c1")
	_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY, ModifiedArguments: mustStruct(t, map[string]any{"expr": "2+2"})})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "modified_arguments do not match the input schema of tool calculator") {
		t.Fatalf("modify with arguments the tool refuses = %v, want INVALID_ARGUMENT naming the tool", err)
	}
	if got, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()}); err != nil || got.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
		t.Fatalf("after the refused decision GetRun = %v, %v; want the call still waiting", got.GetOutcome(), err)
	}
	h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY, ModifiedArguments: mustStruct(t, map[string]any{"expression": "2+2"})})
	final, _ := h.finish(t, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || !strings.Contains(toolMessage(t, final, 0), "4") {
		t.Errorf("outcome %s, tool message %q; want the call run with the arguments decided again", final.GetOutcome(), toolMessage(t, final, 0))
	}
}

func TestApprovalOfSeveralCallsAndErrors(t *testing.T) {
	h := approvalMesh(t, llmtest.Scenario{Name: "two", Match: "two at once", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "a", Name: "calculator", Arguments: `{"expression":"1+1"}`}, {ID: "b", Name: "current_time", Arguments: `{}`}}},
		text("done"),
	}})
	runID := streamToPause(t, h, "two at once")
	resolve := func(call string, d agentv1.ApprovalDecision) (*agentv1.ResolveApprovalResponse, error) {
		return h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: runID, CallId: call, Decision: d})
	}
	if _, err := resolve("zzz", agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE); status.Code(err) != codes.NotFound {
		t.Errorf("unknown call: %v", err)
	}
	if _, err := resolve("a", agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY); status.Code(err) != codes.InvalidArgument {
		t.Errorf("modify without arguments: %v", err)
	}
	first, err := resolve("a", agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE)
	if err != nil || first.GetResumed() || !slices.Equal(first.GetPendingCallIds(), []string{"b"}) {
		t.Fatalf("first decision = %v, %v", first, err)
	}
	if _, err := resolve("a", agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("deciding twice: %v", err)
	}
	second, err := resolve("b", agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT)
	if err != nil || !second.GetResumed() {
		t.Fatalf("second decision = %v, %v", second, err)
	}
	final, _ := h.finish(t, runID)
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || final.GetToolCalls() != 1 {
		t.Fatalf("outcome %s with %d tool calls", final.GetOutcome(), final.GetToolCalls())
	}
	if a, b := toolMessage(t, final, 0), toolMessage(t, final, 1); a != "2" || b != "(tool failed: rejected by the user)" {
		t.Errorf("tool messages %q, %q", a, b)
	}
}

func TestApprovalTimeoutIsARejection(t *testing.T) {
	h := approvalMesh(t, llmtest.Scenario{Name: "slow person", Match: "nobody answers", Turns: []llmtest.Turn{calcTurn("c1", "1+1"), text("never asked")}})
	res := h.run(t, &agentv1.RunRequest{Message: "nobody answers", Overrides: &agentv1.RunOverrides{ApprovalTimeoutMs: i64(100)}})
	paused(t, res, "c1")
	final, kinds := h.finish(t, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_REJECTED || final.GetExitReason() != "APPROVAL_TIMEOUT" {
		t.Fatalf("outcome %s %s", final.GetOutcome(), final.GetExitReason())
	}
	if got := toolMessage(t, final, 0); got != "(tool failed: approval timed out)" {
		t.Errorf("tool message %q", got)
	}
	if count(kinds, "approval_resolved") != 1 || final.GetToolCalls() != 0 {
		t.Errorf("events %v, %d tool calls", kinds, final.GetToolCalls())
	}
	checkInvariants(t, final)
}

// TestRejectionThatEndsTheRun (issue 11.7): with tools.reject_ends_run, or a decision's
// end_run, a person's rejection ends the run REJECTED / USER_REJECTED with a final report that
// says so: the rejected call never runs, nor does any other call of the turn, and the model is
// not asked again. It holds with durable runs (the decision travels through the store) and
// without (it reaches the run directly); a decision after the ending one is refused.
func TestRejectionThatEndsTheRun(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoints %v", durable), func(t *testing.T) {
			scenario := llmtest.Scenario{Name: "two", Match: "two at once", Turns: []llmtest.Turn{
				{ToolCalls: []llmtest.ToolCall{{ID: "a", Name: "calculator", Arguments: `{"expression":"1+1"}`}, {ID: "b", Name: "current_time", Arguments: `{}`}}},
				text("never asked"),
			}}
			cfg := config.Default()
			cfg.Tools.RequireApproval = []string{"calculator", "current_time"}
			cfg.Tools.RejectEndsRun = true
			cfg.Durability.Checkpoints = durable
			h := start(t, cfg, scenario)
			res := h.run(t, &agentv1.RunRequest{Message: "two at once"})
			paused(t, res, "a", "b")
			resp := h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "a",
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, Feedback: "not on my account"})
			if !resp.GetResumed() || len(resp.GetPendingCallIds()) != 0 {
				t.Errorf("resolve = %v, want the run to go on to its end without waiting for b", resp)
			}
			_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "b",
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
			if c := status.Code(err); c != codes.FailedPrecondition && c != codes.NotFound {
				t.Errorf("a decision after the ending rejection: %v, want FAILED_PRECONDITION (ending) or NOT_FOUND (ended)", err)
			}
			final, kinds := h.finish(t, res.GetRunId())
			checkRejected(t, h, "two at once", final, kinds, "not on my account")
			if a, b := toolMessage(t, final, 0), toolMessage(t, final, 1); a != "(tool failed: rejected by the user: not on my account)" ||
				b != "(tool failed: not run: the run ended when call a was rejected)" {
				t.Errorf("tool messages %q, %q", a, b)
			}
		})
	}
}

// checkRejected checks a run that a rejection ended: USER_REJECTED, a report that says so,
// one LLM request, no tool executed, the ending rejection in events and transcript.
func checkRejected(t *testing.T, h *harness, message string, final *typev1.RunResult, kinds []string, feedback string) {
	t.Helper()
	if final.GetOutcome() != typev1.Outcome_OUTCOME_REJECTED || final.GetExitReason() != "USER_REJECTED" || final.GetSuccess() {
		t.Fatalf("outcome %s %s success=%v, want REJECTED USER_REJECTED", final.GetOutcome(), final.GetExitReason(), final.GetSuccess())
	}
	want := `The call to calculator was rejected, so it was not carried out and the run stopped. The reason given: "` + feedback + `".`
	if got := final.GetFinalReport().GetContent(); got != want {
		t.Errorf("final report %q, want %q", got, want)
	}
	if n := len(requestsFor(h.llm, message)); n != 1 {
		t.Errorf("%d LLM requests, want 1: a rejection that ends the run asks the model nothing more", n)
	}
	if final.GetToolCalls() != 0 || count(kinds, "tool_started") != 0 || slices.ContainsFunc(final.GetAccounting(), func(a *typev1.AccountingEntry) bool {
		return a.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_TOOL
	}) {
		t.Errorf("a tool ran: %d tool calls, events %v, accounting %v", final.GetToolCalls(), kinds, final.GetAccounting())
	}
	events, _ := h.storedEvents(t, final.GetRunId())
	ends := 0
	for _, ev := range events {
		if r := ev.GetApprovalResolved(); r != nil && r.GetEndsRun() {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("%d approval_resolved events end the run, want 1", ends)
	}
	if !slices.ContainsFunc(final.GetTranscript(), func(e *typev1.TranscriptEntry) bool {
		return strings.HasSuffix(e.GetDetail(), "the rejection ends the run")
	}) {
		t.Error("the transcript does not record that the rejection ends the run")
	}
	checkInvariants(t, final)
}

// TestEndRunDecidesPerCall: a decision's end_run overrides tools.reject_ends_run both ways,
// and is refused on anything but a rejection; a run's overrides set reject_ends_run.
func TestEndRunDecidesPerCall(t *testing.T) {
	scenarios := []llmtest.Scenario{
		{Name: "stop", Match: "compute 6*7, or stop", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("never asked")}},
		{Name: "stop by override", Match: "compute 6*7, or stop as I said", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("never asked")}},
		{Name: "go on", Match: "compute 6*7, or go on without it", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("ok, I won't")}},
	}
	h := approvalMesh(t, scenarios...) // tools.reject_ends_run is false
	res := h.run(t, &agentv1.RunRequest{Message: "compute 6*7, or stop"})
	paused(t, res, "c1")
	_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE, EndRun: yes()})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "end_run") {
		t.Errorf("end_run with approve: %v, want INVALID_ARGUMENT naming end_run", err)
	}
	h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, Feedback: "too risky", EndRun: yes()})
	final, kinds := h.finish(t, res.GetRunId())
	checkRejected(t, h, "compute 6*7, or stop", final, kinds, "too risky")

	// The run's overrides set reject_ends_run too.
	res = h.run(t, &agentv1.RunRequest{Message: "compute 6*7, or stop as I said", Overrides: &agentv1.RunOverrides{RejectEndsRun: yes()}})
	paused(t, res, "c1")
	h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, Feedback: "as said"})
	final, kinds = h.finish(t, res.GetRunId())
	checkRejected(t, h, "compute 6*7, or stop as I said", final, kinds, "as said")

	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	cfg.Tools.RejectEndsRun = true
	h = start(t, cfg, scenarios...)
	res = h.run(t, &agentv1.RunRequest{Message: "compute 6*7, or go on without it"})
	paused(t, res, "c1")
	no := false
	h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, EndRun: &no})
	final, _ = h.finish(t, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || final.GetFinalReport().GetContent() != "ok, I won't" {
		t.Fatalf("outcome %s %q, want the model told of the rejection and answering", final.GetOutcome(), final.GetFinalReport().GetContent())
	}
	if !final.GetContract().GetRejectEndsRun() {
		t.Error("the contract does not carry tools.reject_ends_run")
	}
}

// TestStreamRunAgainEndsAtThePause: StreamRun ends at the pause of a run that waits for
// approval; repeated with the run's idempotency key (a client reconnecting), it replays the
// run's events and ends at the same pause, where it streamed on until someone decided (up to
// approval_timeout_ms). Once the run goes on, the same call replays it to run_finished.
func TestStreamRunAgainEndsAtThePause(t *testing.T) {
	h := approvalMesh(t, llmtest.Scenario{Name: "pause", Match: "pause and reconnect", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	req := &agentv1.RunRequest{Message: "pause and reconnect", IdempotencyKey: "reconnect"}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // it waited for the decision
	defer cancel()
	kinds := func() ([]string, string) {
		t.Helper()
		stream, err := h.client.StreamRun(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := received(t, stream)
		var ks []string
		for _, ev := range got {
			ks = append(ks, events.Kind(ev))
		}
		return ks, got[len(got)-1].GetRunId()
	}
	first, runID := kinds()
	again, againID := kinds()
	if first[len(first)-1] != "approval_requested" || !slices.Equal(again, first) || againID != runID {
		t.Fatalf("StreamRun again %v (run %s), want the first's events %v (run %s), ending at the pause", again, againID, first, runID)
	}
	h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: runID, CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
	h.finish(t, runID)
	if done, _ := kinds(); done[len(done)-1] != "run_finished" || count(done, "approval_requested") != 1 {
		t.Errorf("StreamRun after the decision %v, want the run to run_finished", done)
	}
}

// TestInputsOverTheirLimits: a decision's feedback and a cancellation's reason are bounded
// (README, "Limits"), and one over its limit is INVALID_ARGUMENT naming the field, the call
// still waiting for a decision. They were taken as they came, and one too large for a NATS
// message failed when the input was stored: UNAVAILABLE, a STORAGE_ERROR marked retryable,
// which a retry met again; and feedback of any size went into the agentmesh.await_approval
// span's agentmesh.detail, a span larger than an OTLP export request takes, losing its batch.
func TestInputsOverTheirLimits(t *testing.T) {
	h := approvalMesh(t, llmtest.Scenario{Name: "big", Match: "big inputs", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	res, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "big inputs"})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")
	id := res.GetRunId()
	big := strings.Repeat("x", 2<<20)
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"feedback", func() error {
			_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: id, CallId: "c1",
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, Feedback: big})
			return err
		}, "feedback: at most 65536 bytes, got 2097152"},
		{"cancellation reason", func() error {
			_, err := h.client.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: id, Reason: big})
			return err
		}, "reason: at most 65536 bytes, got 2097152"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Fatalf("err = %v, want INVALID_ARGUMENT mentioning %q", err, tc.want)
			}
		})
	}
	// The call still waits, and a decision within the limits resumes the run.
	h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: id, CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE,
		Feedback: strings.Repeat("x", 64<<10)})
	if final, _ := h.finish(t, id); final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Errorf("outcome %s %s, want the approved call run", final.GetOutcome(), final.GetExitReason())
	}
}

// TestModifiedArgumentsOverTheLimit: a decision's modified_arguments are at most 256 KiB
// encoded, and more is INVALID_ARGUMENT naming the field, the call still waiting. A tool
// whose input schema bounds no string (a REST or MCP tool) took arguments of any size, and
// arguments too large for a NATS message failed when the decision was stored: UNAVAILABLE, a
// STORAGE_ERROR marked retryable, which a retry met again.
func TestModifiedArgumentsOverTheLimit(t *testing.T) {
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"save_note": {
		Description: "Saves a note.", Method: "POST", URL: "http://127.0.0.1:9/notes", // a POST needs approval
		InputSchema: map[string]any{"type": "object", "required": []any{"text"}, "properties": map[string]any{"text": map[string]any{"type": "string"}}},
	}}
	h := start(t, cfg, llmtest.Scenario{Name: "note", Match: "save a note", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "save_note", Arguments: `{"text":"hi"}`}}}, text("saved")}})
	res, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "save a note"})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")
	modify := func(text string) error {
		_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY, ModifiedArguments: mustStruct(t, map[string]any{"text": text})})
		return err
	}
	const want = "modified_arguments: at most 262144 bytes encoded, got 2097"
	if err := modify(strings.Repeat("x", 2<<20)); status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), want) {
		t.Fatalf("err = %v, want INVALID_ARGUMENT mentioning %q", err, want)
	}
	// The call still waits, and arguments within the limit are taken.
	if err := modify(strings.Repeat("x", 200<<10)); err != nil {
		t.Fatalf("arguments within the limit: %v", err)
	}
}

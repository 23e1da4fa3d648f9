package mesh_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
)

// turnStarts summarises a run's turn_started events as "turn:reason", the reason empty for a
// turn that offered every tool; it fails the test when forced_final and the reason disagree.
func (h *harness) turnStarts(t *testing.T, runID string) []string {
	t.Helper()
	evs, _ := h.storedEvents(t, runID)
	var out []string
	for _, ev := range evs {
		if ts := ev.GetTurnStarted(); ts != nil {
			if ts.GetForcedFinal() != (ts.GetReason() != "") {
				t.Errorf("turn_started %v: forced_final and reason disagree", ts)
			}
			out = append(out, strconv.Itoa(int(ts.GetTurn()))+":"+ts.GetReason())
		}
	}
	return out
}

// toolEvents are the kinds of a run's tool_started and tool_finished events, in order.
func (h *harness) toolEvents(t *testing.T, runID string) []string {
	t.Helper()
	evs, _ := h.storedEvents(t, runID)
	var kinds []string
	for _, ev := range evs {
		if k := events.Kind(ev); k == "tool_started" || k == "tool_finished" {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// lastSystemMessage is the content of the request's last message when it is a system message.
func lastSystemMessage(req llmtest.Request) string {
	last := req.Messages[len(req.Messages)-1]
	if last.Role != "system" {
		return ""
	}
	return string(last.Content)
}

// TestTheLastTurnIsAFinalTurn (issue 11.3, seed 000 §1 "final turn: tools disabled"): the
// last turn under max_turns offers only final_report, with an ephemeral instruction that it
// is the last turn, so a run that reaches the limit can still answer.
func TestTheLastTurnIsAFinalTurn(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "last", Match: "compute it, then answer", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
		text("6 times 7 is 42."),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "compute it, then answer", Overrides: &agentv1.RunOverrides{MaxTurns: i32(2)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || res.GetFinalReport().GetContent() != "6 times 7 is 42." {
		t.Fatalf("outcome %s %s, report %q (%v)", res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent(), res.GetError())
	}
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests, want 2", len(reqs))
	}
	if got := reqs[0].ToolNames(); !slices.Contains(got, "calculator") {
		t.Errorf("the first turn offered %v", got)
	}
	if got := reqs[1].ToolNames(); !slices.Equal(got, []string{"final_report"}) {
		t.Errorf("the last turn offered %v, want only final_report", got)
	}
	if got := lastSystemMessage(reqs[1]); !strings.Contains(got, "This is the last turn") {
		t.Errorf("the last turn's request ends with %q, not the last-turn instruction", got)
	}
	if got := roleInitials(res.GetConversation()); got != "SUATA" {
		t.Errorf("conversation %s: the instruction is ephemeral", got)
	}
	if got := accountingSummary(res.GetAccounting()); got != "LLM:OK TOOL:OK LLM:OK" {
		t.Errorf("accounting %s", got)
	}
	if got := h.turnStarts(t, res.GetRunId()); !slices.Equal(got, []string{"1:", "2:max_turns"}) {
		t.Errorf("turn_started events %v", got)
	}
	checkInvariants(t, res)
}

// TestMaxTurnsOneWithRequiredToolsIsRefused (issue 11.3): with max_turns 1 the only turn is
// the last, which offers no tool, so tool_policy required can never be met: the run ends
// FAILED_PREFLIGHT / INVALID_CONTRACT before any LLM call, whether the policy came from the
// request or from the intent.
func TestMaxTurnsOneWithRequiredToolsIsRefused(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "never", Match: "*", Turns: []llmtest.Turn{text("never asked")}})
	for _, tc := range []struct {
		name   string
		req    *agentv1.RunRequest
		reason string
	}{
		{"required by the request", &agentv1.RunRequest{Message: "what is 2+2?", Overrides: &agentv1.RunOverrides{
			MaxTurns: i32(1), ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED}}, "tool_policy required needs max_turns of at least 2"},
		{"required by the intent", &agentv1.RunRequest{Message: "use the calculator to add 2 and 2", Overrides: &agentv1.RunOverrides{
			MaxTurns: i32(1)}}, "tool_policy required (from the intent) needs max_turns of at least 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantInvalidContract(t, h.run(t, tc.req), tc.reason)
		})
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Errorf("%d provider requests, want none", n)
	}
}

// TestAFinalReportInTheTurnThatDropsACall: a turn that drops a call over max_tool_calls_total
// and gives the final report ends the run MAX_TOOL_CALLS_REACHED with the model's answer, as
// the turn after it would have ("either way", README): it ended COMPLETED_WITH_TOOLS.
func TestAFinalReportInTheTurnThatDropsACall(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "budget", Match: "add and report", Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
		{Name: "calculator", Arguments: `{"expression":"1+1"}`}, {Name: "calculator", Arguments: `{"expression":"2+2"}`},
		{Name: "final_report", Arguments: `{"report_format":"json","content_json":{"answer":2}}`}}}, text("never asked")}})
	res := h.run(t, &agentv1.RunRequest{Message: "add and report", OutputFormat: typev1.OutputFormat_OUTPUT_FORMAT_JSON,
		OutputSchema: mustStruct(t, map[string]any{"type": "object", "required": []any{"answer"}}), Overrides: &agentv1.RunOverrides{MaxToolCallsTotal: i32(1)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED || res.GetExitReason() != "MAX_TOOL_CALLS_REACHED" || res.GetSuccess() {
		t.Fatalf("outcome %s %s success=%v, want FAILED_BUDGET_EXHAUSTED MAX_TOOL_CALLS_REACHED", res.GetOutcome(), res.GetExitReason(), res.GetSuccess())
	}
	if r := res.GetFinalReport(); r.GetContentJson().GetFields()["answer"].GetNumberValue() != 2 || r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_SUCCESS {
		t.Errorf("final report %v: the model's answer, status success (the model gave it)", r)
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Errorf("%d provider requests, want 1: the report ended the run", n)
	}
}

// TestARefusedFinalReportInTheTurnThatDropsACall: a turn that drops a call over
// max_tool_calls_total and whose final report is refused makes the next turn final twice over
// (the refused report collapses the turns, the spent budget leaves one); the model's answer
// in it still ends the run MAX_TOOL_CALLS_REACHED ("either way", README), as it does after the
// budget alone. It ended COMPLETED_WITH_TOOLS, as if no call had been dropped.
func TestARefusedFinalReportInTheTurnThatDropsACall(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "budget", Match: "add and report badly", Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
		{Name: "calculator", Arguments: `{"expression":"1+1"}`}, {Name: "calculator", Arguments: `{"expression":"2+2"}`},
		{Name: "final_report", Arguments: `{"report_format":"text","report_content":""}`}}}, text("1+1 is 2.")}})
	res := h.run(t, &agentv1.RunRequest{Message: "add and report badly", Overrides: &agentv1.RunOverrides{MaxToolCallsTotal: i32(1)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED || res.GetExitReason() != "MAX_TOOL_CALLS_REACHED" || res.GetSuccess() {
		t.Fatalf("outcome %s %s success=%v, want FAILED_BUDGET_EXHAUSTED MAX_TOOL_CALLS_REACHED", res.GetOutcome(), res.GetExitReason(), res.GetSuccess())
	}
	if r := res.GetFinalReport(); r.GetContent() != "1+1 is 2." || r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_SUCCESS {
		t.Errorf("final report %v: the model's answer, status success (the model gave it)", r)
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Errorf("%d provider requests, want 2", n)
	}
	checkInvariants(t, res)
}

// TestToolBudgetLeavesOneFinalAnswer (issue 11.3, seed 002 §7): when max_tool_calls_total is
// used up, the dropped call is answered with a tool message for the model, one final turn
// offers only final_report, and the model's answer reaches the user; the run still ends
// MAX_TOOL_CALLS_REACHED.
func TestToolBudgetLeavesOneFinalAnswer(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "budget", Match: "add twice", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "a", Name: "calculator", Arguments: `{"expression":"1+1"}`}, {ID: "b", Name: "calculator", Arguments: `{"expression":"2+2"}`}}},
		text("1+1 is 2; I could not compute 2+2."),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "add twice", Overrides: &agentv1.RunOverrides{MaxToolCallsTotal: i32(1)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED || res.GetExitReason() != "MAX_TOOL_CALLS_REACHED" || res.GetSuccess() {
		t.Fatalf("outcome %s %s success=%v, want FAILED_BUDGET_EXHAUSTED MAX_TOOL_CALLS_REACHED", res.GetOutcome(), res.GetExitReason(), res.GetSuccess())
	}
	if r := res.GetFinalReport(); r.GetContent() != "1+1 is 2; I could not compute 2+2." || r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_SUCCESS {
		t.Errorf("final report %v: the model's answer, status success (the model gave it)", r)
	}
	if e := res.GetError(); e.GetCode() != "MAX_TOOL_CALLS_REACHED" || !e.GetRetryable() {
		t.Errorf("error %v, want MAX_TOOL_CALLS_REACHED, retryable", e)
	}
	if got := toolMessage(t, res, 1); got != "(tool failed: dropped: the run's budget of 1 tool calls is used up)" {
		t.Errorf("the dropped call's tool message %q", got)
	}
	reqs := h.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests, want 2", len(reqs))
	}
	if got := reqs[1].ToolNames(); !slices.Equal(got, []string{"final_report"}) {
		t.Errorf("the final turn offered %v, want only final_report", got)
	}
	if got := lastSystemMessage(reqs[1]); !strings.Contains(got, "tool call budget is used up") {
		t.Errorf("the final turn's request ends with %q, not the budget instruction", got)
	}
	if got := accountingSummary(res.GetAccounting()); got != "LLM:OK TOOL:OK LLM:OK" || res.GetToolCalls() != 1 {
		t.Errorf("accounting %s, tool_calls %d", got, res.GetToolCalls())
	}
	if got := h.toolEvents(t, res.GetRunId()); !slices.Equal(got, []string{"tool_started", "tool_finished"}) {
		t.Errorf("tool events %v: the dropped call never started", got)
	}
	if got := h.turnStarts(t, res.GetRunId()); !slices.Equal(got, []string{"1:", "2:max_tool_calls"}) {
		t.Errorf("turn_started events %v", got)
	}
	checkInvariants(t, res)
}

// TestToolBudgetFinalTurnWithoutAnswer: a model that calls a tool again in the final turn
// after the budget ran out gets the call refused, never run, and the run ends
// MAX_TOOL_CALLS_REACHED with the canned message.
func TestToolBudgetFinalTurnWithoutAnswer(t *testing.T) {
	again := call("calculator", `{"expression":"3+3"}`)
	h := start(t, nil, llmtest.Scenario{Name: "budget", Match: "add forever", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "a", Name: "calculator", Arguments: `{"expression":"1+1"}`}, {ID: "b", Name: "calculator", Arguments: `{"expression":"2+2"}`}}},
		again, again,
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "add forever", Overrides: &agentv1.RunOverrides{MaxToolCallsTotal: i32(1)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED || res.GetExitReason() != "MAX_TOOL_CALLS_REACHED" {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	if r := res.GetFinalReport(); r.GetContent() != orchestrator.MessageTooComplex || r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_FAILURE {
		t.Errorf("final report %v", r)
	}
	if got := toolMessage(t, res, 2); got != "(tool failed: calculator is not offered in this final turn; only final_report may be called)" {
		t.Errorf("the final turn's tool message %q", got)
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Errorf("%d provider requests, want 2", n)
	}
	if got := accountingSummary(res.GetAccounting()); got != "LLM:OK TOOL:OK LLM:OK" {
		t.Errorf("accounting %s", got)
	}
	if got := h.toolEvents(t, res.GetRunId()); !slices.Equal(got, []string{"tool_started", "tool_finished"}) {
		t.Errorf("tool events %v", got)
	}
	checkInvariants(t, res)
}

// wantInvalidContract fails the test unless res, a run, ended FAILED_PREFLIGHT /
// INVALID_CONTRACT saying reason, before any LLM call.
func wantInvalidContract(t *testing.T, res *typev1.RunResult, reason string) {
	t.Helper()
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != orchestrator.ExitInvalidContract ||
		!strings.Contains(res.GetError().GetMessage(), reason) {
		t.Fatalf("outcome %s %s (%v), want FAILED_PREFLIGHT INVALID_CONTRACT saying %q", res.GetOutcome(), res.GetExitReason(), res.GetError(), reason)
	}
	if llmAttempts(res) != 0 {
		t.Errorf("accounting %s, want no LLM attempt", accountingSummary(res.GetAccounting()))
	}
	checkInvariants(t, res)
}

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
			res := h.run(t, tc.req)
			if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != "INVALID_CONTRACT" ||
				!strings.Contains(res.GetError().GetMessage(), tc.reason) {
				t.Fatalf("outcome %s %s (%v), want FAILED_PREFLIGHT INVALID_CONTRACT saying %q", res.GetOutcome(), res.GetExitReason(), res.GetError(), tc.reason)
			}
			if llmAttempts(res) != 0 {
				t.Errorf("accounting %s, want no LLM attempt", accountingSummary(res.GetAccounting()))
			}
			checkInvariants(t, res)
		})
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Errorf("%d provider requests, want none", n)
	}
}

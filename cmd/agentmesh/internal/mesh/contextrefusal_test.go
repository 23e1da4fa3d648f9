package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestAProviderContextRefusalEndsAtTheContextWindow: a provider that refuses the request as
// longer than its model's context window (OpenAI's 400 context_length_exceeded) refuses it
// again, so that target is not asked again and the next is (a model of a larger window may
// take it); once every target has refused, the run ends as a conversation past the window
// does, FAILED_BUDGET_EXHAUSTED / MAX_CONTEXT_REACHED with its message, not LLM_ERROR, which
// told the user the provider had failed.
func TestAProviderContextRefusalEndsAtTheContextWindow(t *testing.T) {
	refused := llmtest.Turn{Content: "never", Failure: llmtest.FailContextLength}
	wantContextFull := func(t *testing.T, res *typev1.RunResult) {
		t.Helper()
		if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED ||
			res.GetExitReason() != "MAX_CONTEXT_REACHED" || res.GetError().GetRetryable() ||
			!strings.Contains(res.GetError().GetMessage(), "maximum context length") {
			t.Fatalf("outcome %s %s (%v), want FAILED_BUDGET_EXHAUSTED MAX_CONTEXT_REACHED quoting "+
				"the provider, not retryable", res.GetOutcome(), res.GetExitReason(), res.GetError())
		}
	}
	t.Run("one target", func(t *testing.T) {
		h := start(t, nil, llmtest.Scenario{Name: "refused", Match: "too long?", Turns: []llmtest.Turn{refused}})
		res := h.run(t, &agentv1.RunRequest{Message: "too long?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3)}})
		wantContextFull(t, res)
		if n := len(h.llm.Requests()); n != 1 {
			t.Errorf("%d provider requests, want 1: the same request is refused again", n)
		}
	})
	t.Run("every target refuses", func(t *testing.T) {
		h, other := twoProviders(t, llmtest.Scenario{Name: "refused", Match: "too long?", Turns: []llmtest.Turn{refused}},
			llmtest.Scenario{Name: "refused too", Match: "too long?", Turns: []llmtest.Turn{refused}})
		res := h.run(t, &agentv1.RunRequest{Message: "too long?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3), Targets: twoTargets}})
		wantContextFull(t, res)
		if a, b := len(h.llm.Requests()), len(other.Requests()); a != 1 || b != 1 {
			t.Errorf("requests %d and %d, want one per target", a, b)
		}
	})
	t.Run("the next target answers", func(t *testing.T) {
		h, other := twoProviders(t, llmtest.Scenario{Name: "refused", Match: "too long?", Turns: []llmtest.Turn{refused}},
			llmtest.Scenario{Name: "accepted", Match: "too long?", Turns: []llmtest.Turn{text("a larger window")}})
		res := h.run(t, &agentv1.RunRequest{Message: "too long?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3), Targets: twoTargets}})
		if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetFinalReport().GetContent() != "a larger window" {
			t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
		}
		if a, b := len(h.llm.Requests()), len(other.Requests()); a != 1 || b != 1 {
			t.Errorf("requests %d and %d, want one per target", a, b)
		}
	})
}

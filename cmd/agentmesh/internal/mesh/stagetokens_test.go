package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
)

// TestStageTokensOverTheBudgetAskNoTurn: the tokens the intent model spent count toward
// max_tokens_consumed, and a run they took over it ends FAILED_BUDGET_EXHAUSTED /
// MAX_TOKENS_REACHED without asking the model for a turn: the run made its first paid
// request over a budget already spent, and only its COMMIT ended it.
func TestStageTokensOverTheBudgetAskNoTurn(t *testing.T) {
	const message = "Summarise the history of the printing press"
	parsed := submitIntent(`{"goal": "` + message + `", "constraints": [],
		"task_type": "analysis", "needs_clarification": false, "unsafe": false}`)
	answer := llmtest.Turn{Content: "Gutenberg, about 1440."}
	h := startWith(t, nil, intentModel, intentScenario(message, parsed),
		llmtest.Scenario{Name: "answer", Match: message, Turns: []llmtest.Turn{answer}})
	budget := &agentv1.RunOverrides{MaxTokensConsumed: i64(100)} // the intent model spends 240
	res := h.run(t, &agentv1.RunRequest{Message: message, Overrides: budget})
	checkInvariants(t, res)
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED ||
		res.GetExitReason() != orchestrator.ExitMaxTokens {
		t.Fatalf("%s %s (%v), want FAILED_BUDGET_EXHAUSTED %s", res.GetOutcome(),
			res.GetExitReason(), res.GetError(), orchestrator.ExitMaxTokens)
	}
	if n := len(requestsAbout(h, message)); n != 0 || res.GetTurns() != 0 {
		t.Errorf("%d turns, %d requests for an answer after the budget was spent",
			res.GetTurns(), n)
	}
	if got := res.GetUsage().GetTotal(); got != 240 ||
		!strings.Contains(res.GetError().GetMessage(), "240 tokens consumed, budget 100") {
		t.Errorf("usage %d, error %q; want the intent model's 240 tokens over the budget of 100",
			got, res.GetError().GetMessage())
	}
}

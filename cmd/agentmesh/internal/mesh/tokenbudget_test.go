package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestNoCallRunsOnceATurnSpentTheTokenBudget: a turn whose first call's summary (the
// observation model's tokens) took the run over max_tokens_consumed runs none of its later
// calls: COMMIT ends the run MAX_TOKENS_REACHED whatever they return. Before, the second call
// ran all the same.
func TestNoCallRunsOnceATurnSpentTheTokenBudget(t *testing.T) {
	stock := "inventory report\n" + strings.Repeat("sku-0001 apples 5 crates, warehouse north\n", 40)
	tools := staticTools(t, map[string]string{"stock": stock, "time": "noon"})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"stock_report": {Description: "The stock report.", URL: tools.URL + "/stock"},
		"clock":        {Description: "The time.", URL: tools.URL + "/time"},
	}
	h := startWith(t, cfg, func(cfg *config.Config, _ string) {
		cfg.Models.Observation = &config.Target{Provider: "scripted", Model: "summarizer"}
	},
		llmtest.Scenario{Name: "stock", Match: "Stock, then the time.", Turns: []llmtest.Turn{{
			ToolCalls: []llmtest.ToolCall{
				{ID: "s", Name: "stock_report", Arguments: `{}`},
				{ID: "c", Name: "clock", Arguments: `{}`},
			},
			Usage: &llmtest.Usage{PromptTokens: 30, CompletionTokens: 7},
		}, text("Apples at noon.")}},
		llmtest.Scenario{Name: "summarise", Match: stock, Turns: []llmtest.Turn{{
			Content: "Apples.", Usage: &llmtest.Usage{PromptTokens: 500, CompletionTokens: 3},
		}}},
	)
	res := h.runCase(t, &agentv1.RunRequest{Message: "Stock, then the time.",
		Overrides: &agentv1.RunOverrides{ToolResponseMaxBytes: i64(200), MaxTokensConsumed: i64(100)}},
		typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, "MAX_TOKENS_REACHED", "SUATT",
		"LLM:OK TOOL:OK LLM:OK")
	want := "(tool failed: not run: the run's budget of 100 tokens is used up)"
	if got := toolMessage(t, res, 1); got != want {
		t.Errorf("the second call's tool message %q, want %q", got, want)
	}
	if res.GetToolCalls() != 1 {
		t.Errorf("tool_calls %d, want 1: the second call ran over the spent budget",
			res.GetToolCalls())
	}
}

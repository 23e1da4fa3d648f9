package mesh_test

import (
	"strconv"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestStageModelsOnTheRulesProvider: a stage model on the built-in rules provider (a
// configuration that names the `rules` provider for models.*, as `agentmesh dev`'s does for
// its targets) is the stage's own rules, as it is for models.memory. The rules model answers
// every such question with its "configure a provider" text: the observation stage took that
// text as the summary of a large tool result, which the run's model saw in place of the
// result, and the intent and planning stages asked it (and charged the run its tokens) for an
// answer they always threw away.
func TestStageModelsOnTheRulesProvider(t *testing.T) {
	stock := "inventory report\n" + strings.Repeat("sku-0001 apples 5 crates, warehouse north\n", 40)
	tools := staticTools(t, map[string]string{"stock": stock})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"stock_report": {Description: "The stock report.", URL: tools.URL + "/stock"},
	}
	h := startWith(t, cfg, func(cfg *config.Config, _ string) {
		rules := &config.Target{Provider: "rules", Model: "rules-v1"}
		cfg.Models.Intent, cfg.Models.Planning, cfg.Models.Observation = rules, rules, rules
	}, llmtest.Scenario{Name: "stock", Match: "What is in stock?",
		Turns: []llmtest.Turn{call("stock_report", `{}`), text("Apples.")}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "What is in stock?",
		Overrides: &agentv1.RunOverrides{ToolResponseMaxBytes: i64(1000)}},
		typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED", "SUATA", "LLM:OK TOOL:OK LLM:OK")
	want := "[TRUNCATED] Original size " + strconv.Itoa(len(stock)) +
		" bytes; truncated to 1000 bytes.\n" + stock[:1000]
	if got := toolMessage(t, res, 0); got != want {
		t.Errorf("tool message %q, want the result truncated", got)
	}
}

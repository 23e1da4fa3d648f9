package mesh_test

import (
	"math"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestAccountingCostAndReportedModel (issue 11.7): an LLM accounting entry and its
// llm_response event carry the model requested, the model the provider reports it answered
// with (a dated snapshot of the alias), and cost_usd from the configured price of the model:
// uncached input, cached input and output tokens at their prices per million.
func TestAccountingCostAndReportedModel(t *testing.T) {
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		p := cfg.Providers["scripted"]
		cached := 0.5
		p.Models = map[string]config.Model{"gpt-test": {Pricing: &config.Pricing{Input: 2, Output: 8, CachedInput: &cached}}}
		cfg.Providers["scripted"] = p
	}, llmtest.Scenario{Name: "priced", Match: "What does this cost?", Turns: []llmtest.Turn{{
		Content: "Very little.", Model: "gpt-test-2025-01-01",
		Usage: &llmtest.Usage{PromptTokens: 1000, CompletionTokens: 500, CachedTokens: 400},
	}}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "What does this cost?"}, typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUA", "LLM:OK")
	const want = (600*2 + 400*0.5 + 500*8) / 1e6
	e := res.GetAccounting()[0]
	if e.GetModel() != "gpt-test" || e.GetActualModel() != "gpt-test-2025-01-01" || math.Abs(e.GetCostUsd()-want) > 1e-12 {
		t.Errorf("accounting model %q actual %q cost %g, want gpt-test, gpt-test-2025-01-01, %g", e.GetModel(), e.GetActualModel(), e.GetCostUsd(), want)
	}
	responses, _ := h.llmEvents(t, res.GetRunId())
	if len(responses) != 1 {
		t.Fatalf("%d llm_response events", len(responses))
	}
	if r := responses[0]; r.GetModel() != "gpt-test" || r.GetActualModel() != "gpt-test-2025-01-01" || math.Abs(r.GetCostUsd()-want) > 1e-12 {
		t.Errorf("llm_response model %q actual %q cost %g", r.GetModel(), r.GetActualModel(), r.GetCostUsd())
	}
}

// TestReasoningModelGetsMaxCompletionTokens (issue 11.8): an OpenAI reasoning model gets its
// output token limit as max_completion_tokens; max_tokens, which the API refuses for it with
// HTTP 400, is not sent.
func TestReasoningModelGetsMaxCompletionTokens(t *testing.T) {
	limit := 512
	h := start(t, nil, llmtest.Scenario{Name: "o3", Match: "Think hard: 2+2?", Turns: []llmtest.Turn{
		{Content: "4", Expect: &llmtest.Expect{MaxCompletionTokens: &limit}},
	}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "Think hard: 2+2?", Overrides: &agentv1.RunOverrides{
		Targets: []*typev1.Target{{Provider: "scripted", Model: "o3-mini"}}, MaxOutputTokens: i64(int64(limit)),
	}}, typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUA", "LLM:OK")
	if res.GetFinalReport().GetContent() != "4" {
		t.Errorf("final report %q", res.GetFinalReport().GetContent())
	}
	if req := h.llm.Requests()[0]; req.Has("max_tokens") {
		t.Errorf("max_tokens sent to a reasoning model: %s", req.Raw["max_tokens"])
	}
}

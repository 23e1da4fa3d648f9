package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestOneAttemptOneProviderRequest (issue 11.1): with max_retries 3 and a provider that
// answers every request with HTTP 500, the provider receives exactly 3 requests, one per
// accounted attempt — no retry hides behind the orchestrator's back, neither gRPC's between
// the orchestrator and the generation stage nor the HTTP client's in the generation stage.
func TestOneAttemptOneProviderRequest(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "down", Match: "is the provider up?", Turns: []llmtest.Turn{
		{Content: "never", Failure: llmtest.FailModelError},
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "is the provider up?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER {
		t.Fatalf("outcome %s %s, want FAILED_PROVIDER", res.GetOutcome(), res.GetExitReason())
	}
	if got, llm := len(h.llm.Requests()), llmAttempts(res); got != 3 || llm != 3 {
		t.Errorf("the provider received %d requests and accounting shows %d LLM attempts, want 3 and 3", got, llm)
	}
}

// TestUnknownProviderIsAPreflightFailure (issue 11.5): a target naming a provider the
// generation stage does not have ends the run FAILED_PREFLIGHT before any LLM call, with no
// accounting entry, instead of failing at INFER.
func TestUnknownProviderIsAPreflightFailure(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "any", Match: "which provider?", Turns: []llmtest.Turn{text("never asked")}})
	res := h.run(t, &agentv1.RunRequest{Message: "which provider?", Overrides: &agentv1.RunOverrides{
		Targets: []*typev1.Target{{Provider: "scripted", Model: "gpt-test"}, {Provider: "nope", Model: "x"}},
	}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != "INVALID_CONTRACT" ||
		!strings.Contains(res.GetError().GetMessage(), `targets[1] names provider "nope"`) {
		t.Fatalf("outcome %s %s (%v), want FAILED_PREFLIGHT INVALID_CONTRACT naming targets[1]", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if len(res.GetAccounting()) != 0 || len(h.llm.Requests()) != 0 {
		t.Errorf("%d accounting entries and %d provider requests, want none", len(res.GetAccounting()), len(h.llm.Requests()))
	}
}

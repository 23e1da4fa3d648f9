package mesh_test

import (
	"slices"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
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
// accounting entry, instead of failing at INFER; also right after a run that found the stage's
// providers, which the orchestrator keeps for a second (issue 15).
func TestUnknownProviderIsAPreflightFailure(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "any", Match: "which provider?", Turns: []llmtest.Turn{text("never asked")}})
	for i := range 2 {
		res := h.run(t, &agentv1.RunRequest{Message: "which provider?", Overrides: &agentv1.RunOverrides{
			Targets: []*typev1.Target{{Provider: "scripted", Model: "gpt-test"}, {Provider: "nope", Model: "x"}},
		}})
		if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != "INVALID_CONTRACT" ||
			!strings.Contains(res.GetError().GetMessage(), `targets[1] names provider "nope"`) {
			t.Fatalf("run %d: outcome %s %s (%v), want FAILED_PREFLIGHT INVALID_CONTRACT naming targets[1]", i+1, res.GetOutcome(), res.GetExitReason(), res.GetError())
		}
		if len(res.GetAccounting()) != 0 || len(h.llm.Requests()) != 0 {
			t.Errorf("run %d: %d accounting entries and %d provider requests, want none", i+1, len(res.GetAccounting()), len(h.llm.Requests()))
		}
	}
}

// twoProviders starts a mesh whose provider "scripted" is served by first and "scripted2" by
// a second scripted LLM serving second, which it returns with the harness.
func twoProviders(t *testing.T, first, second llmtest.Scenario) (*harness, *llmtest.Server) {
	t.Helper()
	other := llmtest.New(t, second)
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		cfg.Providers["scripted2"] = config.Provider{Type: "openai", BaseURL: other.URL(), APIKey: "test-key"}
	}, first)
	return h, other
}

// twoTargets are the targets of the two providers of twoProviders.
var twoTargets = []*typev1.Target{{Provider: "scripted", Model: "gpt-test"}, {Provider: "scripted2", Model: "gpt-other"}}

// recoveryWaits returns the backoff of each recovery decision of a run, in order.
func (h *harness) recoveryWaits(t *testing.T, runID string) []int64 {
	t.Helper()
	evs, _ := h.storedEvents(t, runID)
	var waits []int64
	for _, ev := range evs {
		if d := ev.GetRecoveryDecided(); d != nil {
			waits = append(waits, d.GetBackoffMs())
		}
	}
	return waits
}

// TestRateLimitedCycleWaitsTheLargestRetryAfter (issue 11.7): a rate-limited target hands the
// attempt to the next target at once (seed 000 §3: cycle to the next target); only when every
// target was rate-limited in one round-robin cycle does the run wait, for the largest
// Retry-After the cycle advertised, before the next cycle.
func TestRateLimitedCycleWaitsTheLargestRetryAfter(t *testing.T) {
	h, other := twoProviders(t,
		llmtest.Scenario{Name: "limited once", Match: "busy?", Turns: []llmtest.Turn{
			{Content: "answered after the wait", Failure: llmtest.FailRateLimit, FailuresBeforeSuccess: 1, RetryAfterMS: 1000},
		}},
		llmtest.Scenario{Name: "limited", Match: "busy?", Turns: []llmtest.Turn{
			{Content: "never", Failure: llmtest.FailRateLimit, RetryAfterMS: 300},
		}})
	res := h.run(t, &agentv1.RunRequest{Message: "busy?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3), Targets: twoTargets}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetFinalReport().GetContent() != "answered after the wait" {
		t.Fatalf("outcome %s %s %q (%v)", res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent(), res.GetError())
	}
	if got := accountingSummary(res.GetAccounting()); got != "LLM:FAILED LLM:FAILED LLM:OK" {
		t.Errorf("accounting %s", got)
	}
	if waits := h.recoveryWaits(t, res.GetRunId()); !slices.Equal(waits, []int64{0, 1000}) {
		t.Errorf("recovery waits %v ms, want [0 1000]: on to the next target at once, then the cycle's largest Retry-After", waits)
	}
	if a, b := len(h.llm.Requests()), len(other.Requests()); a != 2 || b != 1 {
		t.Errorf("requests %d and %d, want 2 to the first target and 1 to the second", a, b)
	}
}

// TestRateLimitWaitLongerThanTheRunAborts (issue 11.7): a Retry-After that does not fit in the
// run's remaining time ends the run RATE_LIMITED at once instead of waiting into a timeout.
func TestRateLimitWaitLongerThanTheRunAborts(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "limited", Match: "busy for long?", Turns: []llmtest.Turn{
		{Content: "never", Failure: llmtest.FailRateLimit, RetryAfterMS: 30_000},
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "busy for long?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3), TotalTimeoutMs: i64(5000)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER || res.GetExitReason() != "RATE_LIMITED" {
		t.Fatalf("outcome %s %s (%v), want FAILED_PROVIDER RATE_LIMITED", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if waits := h.recoveryWaits(t, res.GetRunId()); !slices.Equal(waits, []int64{0}) {
		t.Errorf("recovery waits %v, want one decision that does not wait", waits)
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Errorf("%d provider requests, want 1", n)
	}
}

// TestBadRequestIsNeverRetried (issue 11.8): a provider that refuses the request as invalid
// (HTTP 400) gets it once: the same request to the same target is refused again, whatever
// max_retries says. Another target builds its own request (another model, another API), so
// the turn moves on to it; it ends when every target has refused.
func TestBadRequestIsNeverRetried(t *testing.T) {
	refused := llmtest.Turn{Content: "never", Failure: llmtest.FailBadRequest}
	t.Run("one target", func(t *testing.T) {
		h := start(t, nil, llmtest.Scenario{Name: "refused", Match: "refused?", Turns: []llmtest.Turn{refused}})
		res := h.run(t, &agentv1.RunRequest{Message: "refused?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3)}})
		if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER || res.GetExitReason() != "LLM_ERROR" || res.GetError().GetRetryable() ||
			!strings.Contains(res.GetError().GetMessage(), "HTTP 400") {
			t.Fatalf("outcome %s %s (%v), want FAILED_PROVIDER LLM_ERROR, not retryable", res.GetOutcome(), res.GetExitReason(), res.GetError())
		}
		if n, llm := len(h.llm.Requests()), llmAttempts(res); n != 1 || llm != 1 {
			t.Errorf("%d provider requests and %d accounted attempts, want 1 and 1", n, llm)
		}
	})
	t.Run("every target refuses", func(t *testing.T) {
		h, other := twoProviders(t, llmtest.Scenario{Name: "refused", Match: "refused?", Turns: []llmtest.Turn{refused}},
			llmtest.Scenario{Name: "refused too", Match: "refused?", Turns: []llmtest.Turn{refused}})
		res := h.run(t, &agentv1.RunRequest{Message: "refused?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3), Targets: twoTargets}})
		if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER || res.GetExitReason() != "LLM_ERROR" || res.GetError().GetRetryable() {
			t.Fatalf("outcome %s %s (%v), want FAILED_PROVIDER LLM_ERROR, not retryable", res.GetOutcome(), res.GetExitReason(), res.GetError())
		}
		if a, b, llm := len(h.llm.Requests()), len(other.Requests()), llmAttempts(res); a != 1 || b != 1 || llm != 2 {
			t.Errorf("requests %d and %d, %d accounted attempts; want one per target", a, b, llm)
		}
	})
	t.Run("the next target answers", func(t *testing.T) {
		h, other := twoProviders(t, llmtest.Scenario{Name: "refused", Match: "refused?", Turns: []llmtest.Turn{refused}},
			llmtest.Scenario{Name: "accepted", Match: "refused?", Turns: []llmtest.Turn{text("answered by the second target")}})
		res := h.run(t, &agentv1.RunRequest{Message: "refused?", Overrides: &agentv1.RunOverrides{MaxRetries: i32(3), Targets: twoTargets}})
		if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetFinalReport().GetContent() != "answered by the second target" {
			t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
		}
		if a, b := len(h.llm.Requests()), len(other.Requests()); a != 1 || b != 1 {
			t.Errorf("requests %d and %d, want one per target", a, b)
		}
	})
}

// TestDecideSendsNoTargetARequestItRefused: Decide cycles over the targets as a run's turn
// does (seed 000 §3), and as a run, it never sends a request again to a target that refused it
// as invalid (HTTP 400): with two targets that both refuse, each gets the request once and the
// decision is the canned LLM-failure message. Decide told the recovery stage of no refused
// target, so the third of max_retries attempts went back to the first target, which refused
// the same request again.
func TestDecideSendsNoTargetARequestItRefused(t *testing.T) {
	refused := llmtest.Turn{Content: "never", Failure: llmtest.FailBadRequest}
	other := llmtest.New(t, llmtest.Scenario{Name: "refused too", Match: "refused?", Turns: []llmtest.Turn{refused}})
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		cfg.Providers["scripted2"] = config.Provider{Type: "openai", BaseURL: other.URL(), APIKey: "test-key"}
		cfg.Targets = []config.Target{{Provider: "scripted", Model: "gpt-test"}, {Provider: "scripted2", Model: "gpt-other"}}
		cfg.Defaults.MaxRetries = 3
	}, llmtest.Scenario{Name: "refused", Match: "refused?", Turns: []llmtest.Turn{refused}})
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "refused?"})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY || d.GetResponseText() != orchestrator.MessageProviderFailure {
		t.Errorf("decision %v %q, want RESPOND_ONLY %q", d.GetDecisionType(), d.GetResponseText(), orchestrator.MessageProviderFailure)
	}
	if a, b := len(h.llm.Requests()), len(other.Requests()); a != 1 || b != 1 {
		t.Errorf("requests %d and %d, want one per target", a, b)
	}
	var providers []string
	for _, e := range d.GetAccounting() {
		if e.GetStage() == "" {
			providers = append(providers, e.GetProvider())
		}
	}
	if !slices.Equal(providers, []string{"scripted", "scripted2"}) {
		t.Errorf("attempts accounted on %v, want scripted then scripted2", providers)
	}
}

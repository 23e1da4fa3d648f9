package mesh_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// slowOnce serves REST tools that never answer their first request (it times out) and answer
// every later one after delay; it counts the requests by path.
type slowOnce struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func newSlowOnce(t *testing.T, delay time.Duration) *slowOnce {
	t.Helper()
	s := &slowOnce{calls: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[r.URL.Path]++
		n := s.calls[r.URL.Path]
		s.mu.Unlock()
		if n == 1 {
			<-r.Context().Done()
			return
		}
		// A tool slower than the first timeout and quicker than the retry's.
		select {
		case <-time.After(delay):
			_, _ = w.Write([]byte("fresh data"))
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *slowOnce) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// recoveryStrategies returns the strategy of each recovery decision of a run, in order.
func (h *harness) recoveryStrategies(t *testing.T, runID string) []string {
	t.Helper()
	evs, _ := h.storedEvents(t, runID)
	var out []string
	for _, ev := range evs {
		if d := ev.GetRecoveryDecided(); d != nil {
			out = append(out, d.GetStage()+":"+d.GetStrategy())
		}
	}
	return out
}

// TestToolTimeoutIsRetriedOnceWhenIdempotent (issue 13.4, seed 003: timeout → retry with a
// longer timeout): an idempotent tool that timed out is run again once, with the timeout
// recovery doubled — long enough for a tool slower than the first timeout — and the model
// sees the result with a note; a tool that is not idempotent is never run again, since it may
// have had its effect, and the model sees seed 000's "(tool failed: timeout)".
func TestToolTimeoutIsRetriedOnceWhenIdempotent(t *testing.T) {
	// The timeout in ms; the retry gets 2000 ms, and the tool answers after 1500 ms, half a
	// second from either timeout, which a loaded machine's scheduling does not bridge (a
	// quarter of a second did once).
	const timeout = 1000
	tools := newSlowOnce(t, 1500*time.Millisecond)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"lookup":    {Description: "A read-only lookup.", URL: tools.URL + "/lookup"},
		"send_mail": {Description: "Sends a mail.", Method: http.MethodPost, URL: tools.URL + "/mail"},
	}
	cfg.Tools.Idempotent = []string{"lookup"}
	cfg.Tools.NoApproval = []string{"send_mail"}
	h := start(t, cfg,
		llmtest.Scenario{Name: "lookup", Match: "Look it up.", Turns: []llmtest.Turn{call("lookup", `{}`), text("Found it.")}},
		llmtest.Scenario{Name: "mail", Match: "Mail it.", Turns: []llmtest.Turn{call("send_mail", `{}`), text("The mail timed out.")}},
	)
	over := &agentv1.RunOverrides{ToolTimeoutMs: i64(timeout)}

	res := h.runCase(t, &agentv1.RunRequest{Message: "Look it up.", Overrides: over},
		typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED", "SUATA", "LLM:OK TOOL:FAILED TOOL:OK LLM:OK")
	checkInvariants(t, res)
	if got, want := toolMessage(t, res, 0), "[lookup timed out after 1000 ms; this is the result of a retry with a timeout of 2000 ms]\nfresh data"; got != want {
		t.Errorf("tool message %q, want %q", got, want)
	}
	if n := tools.count("/lookup"); n != 2 {
		t.Errorf("the idempotent tool got %d requests, want 2", n)
	}
	if res.GetToolCalls() != 1 {
		t.Errorf("tool_calls %d, want 1: the retry is the same call", res.GetToolCalls())
	}
	if got := h.recoveryStrategies(t, res.GetRunId()); !slices.Equal(got, []string{"action:retry"}) {
		t.Errorf("recovery decisions %v, want one retry", got)
	}

	res = h.runCase(t, &agentv1.RunRequest{Message: "Mail it.", Overrides: over},
		typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED", "SUATA", "LLM:OK TOOL:FAILED LLM:OK")
	if got := toolMessage(t, res, 0); got != "(tool failed: timeout)" {
		t.Errorf("tool message %q", got)
	}
	if n := tools.count("/mail"); n != 1 {
		t.Errorf("the tool that is not idempotent got %d requests, want 1", n)
	}
	if got := h.recoveryStrategies(t, res.GetRunId()); !slices.Equal(got, []string{"action:fallback"}) {
		t.Errorf("recovery decisions %v, want one that does not retry", got)
	}
}

// TestTimedOutRetryIsNotRetriedAgain (issue 13.4): the retry of a timed-out idempotent tool is
// the only one: when it times out too, recovery aborts and the model sees the timeout.
func TestTimedOutRetryIsNotRetriedAgain(t *testing.T) {
	tools := newSlowOnce(t, time.Hour)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"lookup": {Description: "A read-only lookup.", URL: tools.URL + "/lookup"}}
	cfg.Tools.Idempotent = []string{"lookup"}
	h := start(t, cfg, llmtest.Scenario{Name: "lookup", Match: "Look it up.", Turns: []llmtest.Turn{call("lookup", `{}`), text("It timed out.")}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "Look it up.", Overrides: &agentv1.RunOverrides{ToolTimeoutMs: i64(100)}},
		typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED", "SUATA", "LLM:OK TOOL:FAILED TOOL:FAILED LLM:OK")
	if got := toolMessage(t, res, 0); got != "(tool failed: timeout)" {
		t.Errorf("tool message %q", got)
	}
	if n := tools.count("/lookup"); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	if got := h.recoveryStrategies(t, res.GetRunId()); !slices.Equal(got, []string{"action:retry", "action:abort"}) {
		t.Errorf("recovery decisions %v", got)
	}
}

// TestFallbackModel (issue 13.4, seed 003: LLM error → fallback to a simpler model): when the
// turn's attempts on the run's targets fail, the configured models.fallback gets one more
// attempt, visible in accounting as an entry of its own provider and model; when it fails too,
// the run ends as it would have.
func TestFallbackModel(t *testing.T) {
	small := llmtest.New(t,
		llmtest.Scenario{Name: "rescue", Match: "Are you there?", Turns: []llmtest.Turn{text("The small model answers.")}},
		llmtest.Scenario{Name: "down too", Match: "Anyone?", Turns: []llmtest.Turn{{Failure: llmtest.FailModelError}}},
	)
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		cfg.Providers["small"] = config.Provider{Type: "openai", BaseURL: small.URL(), APIKey: "test-key"}
		cfg.Models.Fallback = &config.Target{Provider: "small", Model: "small-model"}
	},
		llmtest.Scenario{Name: "down", Match: "Are you there?", Turns: []llmtest.Turn{{Failure: llmtest.FailModelError}}},
		llmtest.Scenario{Name: "down as well", Match: "Anyone?", Turns: []llmtest.Turn{{Failure: llmtest.FailModelError}}},
	)
	over := &agentv1.RunOverrides{MaxRetries: i32(2)}

	res := h.runCase(t, &agentv1.RunRequest{Message: "Are you there?", Overrides: over},
		typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUA", "LLM:FAILED LLM:FAILED LLM:OK")
	checkInvariants(t, res)
	var used []string
	for _, e := range res.GetAccounting() {
		used = append(used, e.GetProvider()+"/"+e.GetModel())
	}
	if want := []string{"scripted/gpt-test", "scripted/gpt-test", "small/small-model"}; !slices.Equal(used, want) {
		t.Errorf("accounting targets %v, want %v", used, want)
	}
	if res.GetFinalReport().GetContent() != "The small model answers." {
		t.Errorf("final report %q", res.GetFinalReport().GetContent())
	}
	if fb := res.GetContract().GetFallbackTarget(); fb.GetProvider() != "small" || fb.GetModel() != "small-model" {
		t.Errorf("contract fallback_target %v", fb)
	}
	if got := h.recoveryStrategies(t, res.GetRunId()); !slices.Equal(got, []string{"generation:fallback", "generation:fallback"}) {
		t.Errorf("recovery decisions %v", got)
	}
	evs, _ := h.storedEvents(t, res.GetRunId())
	for _, ev := range evs {
		if r := ev.GetLlmResponse(); r != nil && r.GetProvider() == "small" && r.GetAttempt() != 3 {
			t.Errorf("the fallback's attempt is numbered %d, want 3", r.GetAttempt())
		}
	}
	var detail string
	for _, e := range res.GetTranscript() {
		if strings.HasSuffix(e.GetStepId(), "INFER") {
			detail = e.GetDetail()
		}
	}
	if !strings.Contains(detail, "small/small-model") {
		t.Errorf("INFER detail %q does not name the fallback model", detail)
	}

	res = h.runCase(t, &agentv1.RunRequest{Message: "Anyone?", Overrides: over},
		typev1.Outcome_OUTCOME_FAILED_PROVIDER, "LLM_ERROR", "SU", "LLM:FAILED LLM:FAILED LLM:FAILED")
	if last := res.GetAccounting()[2]; last.GetProvider() != "small" || last.GetError() == "" {
		t.Errorf("the last attempt %v, want the fallback's, failed", last)
	}
	if n := len(small.Requests()); n != 2 {
		t.Errorf("the fallback model got %d requests in all, want 2 (one per run)", n)
	}
}

// TestFallbackModelLimits: the fallback model gets a request that fits its own configured
// limits (providers.*.models.*), not the targets'. Its max_tokens is its max_output_tokens
// where that is below the contract's; a conversation too long for its context window is not
// sent it (its provider would refuse it, HTTP 400, and that refusal replaced the failure it
// was asked to rescue in the run's end): the run ends with the targets' failure, and the
// INFER detail says why the fallback was not asked, naming the model and its window. Decide's
// fallback attempt is held to the same limits.
func TestFallbackModelLimits(t *testing.T) {
	small := llmtest.New(t,
		llmtest.Scenario{Name: "rescue", Match: "Are you there?", Turns: []llmtest.Turn{text("The small model answers.")}},
		llmtest.Scenario{Name: "too long", Match: "Anyone?*", Turns: []llmtest.Turn{{Failure: llmtest.FailBadRequest}}},
	)
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		cfg.Providers["small"] = config.Provider{Type: "openai", BaseURL: small.URL(), APIKey: "test-key",
			Models: map[string]config.Model{"small-model": {ContextWindow: 2000, ContextWindowBufferTokens: 100, MaxOutputTokens: 300}}}
		cfg.Models.Fallback = &config.Target{Provider: "small", Model: "small-model"}
	},
		llmtest.Scenario{Name: "locked out", Match: "Are you there?", Turns: []llmtest.Turn{{Failure: llmtest.FailAuthError}}},
		llmtest.Scenario{Name: "locked out too", Match: "Anyone?*", Turns: []llmtest.Turn{{Failure: llmtest.FailAuthError}}},
	)

	res := h.runCase(t, &agentv1.RunRequest{Message: "Are you there?"},
		typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, "COMPLETED", "SUA", "LLM:FAILED LLM:OK")
	reqs := small.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the fallback model got %d requests, want 1", len(reqs))
	}
	if got := reqs[0].MaxTokens; got == nil || *got != 300 {
		t.Errorf("the fallback's max_tokens %s, want 300 (its max_output_tokens)", reqs[0].Raw["max_tokens"])
	}
	if res.GetContract().GetMaxOutputTokens() == 300 {
		t.Errorf("the contract took the fallback's max_output_tokens; the targets' limits are its")
	}

	long := "Anyone? " + strings.Repeat("Please tell me whether anybody is there at all. ", 300)
	res = h.runCase(t, &agentv1.RunRequest{Message: long},
		typev1.Outcome_OUTCOME_FAILED_PROVIDER, "AUTH_ERROR", "SU", "LLM:FAILED")
	// Decide's fallback attempt likewise (its decision is then the canned failure message).
	if _, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: long}); err != nil {
		t.Fatal(err)
	}
	if n := len(small.Requests()); n != 1 {
		t.Errorf("the fallback model got %d requests in all, want 1: the long conversations do not fit its window", n)
	}
	var detail string
	for _, e := range res.GetTranscript() {
		if strings.HasSuffix(e.GetStepId(), "INFER") {
			detail = e.GetDetail()
		}
	}
	for _, want := range []string{"small/small-model", "context window of 2000 tokens", "auth"} {
		if !strings.Contains(strings.ToLower(detail), strings.ToLower(want)) {
			t.Errorf("INFER detail %q does not say %q", detail, want)
		}
	}
}

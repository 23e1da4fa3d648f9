package mesh_test

import (
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// streamAnswers sets the overrides of a run started with Run to stream its answers, as
// StreamRun's do: llm_delta events carry their text.
func streamAnswers(o *agentv1.RunOverrides) {
	streamed := true
	o.StreamAnswers = &streamed
}

// llmEvents returns a run's llm_response events and the number of its llm_delta events.
func (h *harness) llmEvents(t *testing.T, runID string) ([]*eventv1.LlmResponse, int) {
	t.Helper()
	evs, _ := h.storedEvents(t, runID)
	var responses []*eventv1.LlmResponse
	deltas := 0
	for _, ev := range evs {
		if r := ev.GetLlmResponse(); r != nil {
			responses = append(responses, r)
		}
		if ev.GetLlmDelta() != nil {
			deltas++
		}
	}
	return responses, deltas
}

// TestResponseCache: with defaults.cache_responses, an identical second run is answered from
// the generation stage's response cache (seed 002 §8): marked cached, no llm_delta, no HTTP
// request to the provider. The runs ask for their answers streamed: the first, a miss, streams
// its answer (llm_delta) and fills the cache; the second, a hit, streams none. A run that turns
// the cache off asks the provider again.
func TestResponseCache(t *testing.T) {
	cfg := config.Default()
	cfg.Defaults.CacheResponses = true
	h := start(t, cfg, llmtest.Scenario{Name: "cache", Match: "What is the capital of France?", Turns: []llmtest.Turn{
		text("The capital of France is Paris."),
	}})
	streamed := true
	req := &agentv1.RunRequest{Message: "What is the capital of France?", UserId: "carol", Overrides: &agentv1.RunOverrides{StreamAnswers: &streamed}}

	first := h.run(t, req)
	second := h.run(t, req)
	for i, res := range []*typev1.RunResult{first, second} {
		if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetFinalReport().GetContent() != "The capital of France is Paris." {
			t.Fatalf("run %d: %s %q (%v)", i+1, res.GetOutcome(), res.GetFinalReport().GetContent(), res.GetError())
		}
		if !res.GetContract().GetCacheResponses() {
			t.Errorf("run %d: contract without cache_responses", i+1)
		}
		checkInvariants(t, res)
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Errorf("%d HTTP requests to the provider, want 1: the second run is a cache hit", n)
	}
	responses, deltas := h.llmEvents(t, first.GetRunId())
	if len(responses) != 1 || responses[0].GetCached() || deltas == 0 {
		t.Errorf("first run: llm_response %v, %d llm_delta; want one streamed, uncached response", responses, deltas)
	}
	responses, deltas = h.llmEvents(t, second.GetRunId())
	if len(responses) != 1 || !responses[0].GetCached() || deltas != 0 {
		t.Errorf("second run: llm_response %v, %d llm_delta; want one cached response and no deltas", responses, deltas)
	}
	if got := responses[0].GetMessage().GetContent(); got != "The capital of France is Paris." {
		t.Errorf("cached answer %q", got)
	}

	// The override turns the cache off: the run streams and asks the provider again.
	off := false
	third := h.run(t, &agentv1.RunRequest{Message: req.GetMessage(), UserId: "carol", Overrides: &agentv1.RunOverrides{CacheResponses: &off, StreamAnswers: &streamed}})
	if third.GetContract().GetCacheResponses() || third.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
		t.Fatalf("third run: %s, contract cache_responses %v", third.GetOutcome(), third.GetContract().GetCacheResponses())
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Errorf("%d HTTP requests to the provider, want 2", n)
	}
	responses, deltas = h.llmEvents(t, third.GetRunId())
	if len(responses) != 1 || responses[0].GetCached() || deltas == 0 {
		t.Errorf("third run: llm_response %v, %d llm_delta; want a streamed, uncached answer", responses, deltas)
	}
}

// TestResponseCacheKeepsUsersApart: the response cache is kept per user. Another user's run
// with the identical request asks the provider (its llm_response is not cached: a hit would
// tell dave that carol had asked, and serve him her answer), while carol's second run is
// answered from her own entry.
func TestResponseCacheKeepsUsersApart(t *testing.T) {
	cfg := config.Default()
	cfg.Defaults.CacheResponses = true
	h := start(t, cfg, llmtest.Scenario{Name: "cache", Match: "What is the capital of Spain?",
		Turns: []llmtest.Turn{text("The capital of Spain is Madrid.")}})
	cached := func(user string) bool {
		t.Helper()
		res := h.run(t, &agentv1.RunRequest{Message: "What is the capital of Spain?", UserId: user})
		if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
			t.Fatalf("%s's run: %s (%v)", user, res.GetOutcome(), res.GetError())
		}
		responses, _ := h.llmEvents(t, res.GetRunId())
		if len(responses) != 1 {
			t.Fatalf("%s's run: llm_response %v, want one", user, responses)
		}
		return responses[0].GetCached()
	}
	if cached("carol") {
		t.Error("carol's first run was answered from the cache")
	}
	if cached("dave") {
		t.Error("dave's run was answered from carol's entry")
	}
	if !cached("carol") {
		t.Error("carol's second run missed her own entry")
	}
	if n := len(h.llm.Requests()); n != 2 {
		t.Errorf("%d HTTP requests to the provider, want 2 (carol's and dave's)", n)
	}
}

// TestCachedAnswerConsumesNoTokens: an answer from the generation stage's response cache is no
// provider request (seed 002 §8: the cache reduces API costs), so it consumes no tokens: its
// accounting entry (attempts 0, cost 0) and llm_response carry none, the run's usage does not
// count it, and max_tokens_consumed does not end a run that consumed nothing. The cached
// answer's tokens were counted in usage and against the budget as if it had been asked for
// again, while the same entry said no request was made and cost nothing.
func TestCachedAnswerConsumesNoTokens(t *testing.T) {
	cfg := config.Default()
	cfg.Defaults.CacheResponses = true
	h := start(t, cfg, llmtest.Scenario{Name: "cache", Match: "What is the capital of Italy?", Turns: []llmtest.Turn{
		text("The capital of Italy is Rome."),
	}})
	first := h.run(t, &agentv1.RunRequest{Message: "What is the capital of Italy?", UserId: "carol"})
	spent := first.GetUsage().GetTotal()
	if first.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || spent == 0 {
		t.Fatalf("first run: %s, usage %v", first.GetOutcome(), first.GetUsage())
	}
	budget := spent / 2
	second := h.run(t, &agentv1.RunRequest{Message: "What is the capital of Italy?", UserId: "carol",
		Overrides: &agentv1.RunOverrides{MaxTokensConsumed: &budget}})
	if second.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || second.GetFinalReport().GetContent() != "The capital of Italy is Rome." {
		t.Fatalf("second run (max_tokens_consumed %d): %s %s %q (%v), want the cached answer", budget,
			second.GetOutcome(), second.GetExitReason(), second.GetFinalReport().GetContent(), second.GetError())
	}
	checkInvariants(t, second)
	if n := len(h.llm.Requests()); n != 1 {
		t.Errorf("%d HTTP requests to the provider, want 1", n)
	}
	if u := second.GetUsage(); u.GetTotal() != 0 || u.GetInput() != 0 || u.GetOutput() != 0 {
		t.Errorf("second run's usage %v, want none: its answer came from the cache", u)
	}
	acc := second.GetAccounting()
	if len(acc) != 1 || acc[0].GetAttempts() != 0 || acc[0].GetCostUsd() != 0 || acc[0].GetTokens().GetTotal() != 0 || acc[0].GetTokens().GetInput() != 0 {
		t.Errorf("second run's accounting %v, want one entry with no attempt, no cost and no tokens", acc)
	}
	responses, _ := h.llmEvents(t, second.GetRunId())
	if len(responses) != 1 || !responses[0].GetCached() || responses[0].GetUsage().GetTotal() != 0 {
		t.Errorf("second run's llm_response %v, want one cached response without tokens", responses)
	}
}

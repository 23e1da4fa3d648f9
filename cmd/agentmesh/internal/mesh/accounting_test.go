package mesh_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestToolRetriesAreAccounted (issue 11.1): a REST tool whose server answers 503 once and
// then 200 is retried by the action stage, and the run's tool entry accounts both requests
// the server received; every LLM entry is one provider request.
func TestToolRetriesAreAccounted(t *testing.T) {
	var requests atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if requests.Add(1) == 1 {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("42"))
	}))
	t.Cleanup(flaky.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"lookup": {Description: "Looks the answer up.", URL: flaky.URL}}
	h := start(t, cfg, llmtest.Scenario{Name: "flaky tool", Match: "look the answer up", Turns: []llmtest.Turn{
		call("lookup", `{}`), text("It is 42."),
	}})

	res := h.run(t, &agentv1.RunRequest{Message: "look the answer up"})
	if !res.GetSuccess() || toolMessage(t, res, 0) != "42" {
		t.Fatalf("outcome %s %s, tool message %q; want a success that saw 42", res.GetOutcome(), res.GetExitReason(), toolMessage(t, res, 0))
	}
	checkInvariants(t, res)
	var tools []*typev1.AccountingEntry
	llm := int32(0)
	for _, a := range res.GetAccounting() {
		switch a.GetType() {
		case typev1.AccountingType_ACCOUNTING_TYPE_TOOL:
			tools = append(tools, a)
		case typev1.AccountingType_ACCOUNTING_TYPE_LLM:
			llm += a.GetAttempts()
		}
	}
	if len(tools) != 1 || tools[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK || tools[0].GetAttempts() != requests.Load() || requests.Load() != 2 {
		t.Errorf("tool accounting %v; the tool's server received %d requests, want one ok entry of 2 attempts", tools, requests.Load())
	}
	if got := len(h.llm.Requests()); int(llm) != got {
		t.Errorf("LLM entries account %d requests, the provider received %d", llm, got)
	}
}

// embeddingServer is an OpenAI-compatible embeddings endpoint that answers status (200 with
// llmtest vectors, or an error) and counts the requests it receives.
func embeddingServer(t *testing.T, status int) (url string, requests *atomic.Int32) {
	t.Helper()
	requests = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if status != http.StatusOK {
			http.Error(w, `{"error": {"message": "overloaded"}}`, status)
			return
		}
		var req struct {
			Model string `json:"model"`
			Input []string
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		data := make([]map[string]any, len(req.Input))
		for i, text := range req.Input {
			data[i] = map[string]any{"object": "embedding", "index": i, "embedding": llmtest.Embed(text)}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"object": "list", "model": req.Model, "data": data,
			"usage": map[string]int{"prompt_tokens": 3, "total_tokens": 3},
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", requests
}

// TestEmbeddingsAreAccounted (issue 11.1): with memory.embeddings set, the embedding of the
// memory search in context assembly and that of knowledge_search's query are in the run's
// accounting, one EMBEDDING entry per request the embedding provider received — also when the
// provider fails (search falls back to BM25), where gRPC's retry of UNAVAILABLE between the
// memory and generation stages sent three requests per search, none accounted. An answered
// request costs its tokens at the model's configured input price (it cost 0 whatever the price).
func TestEmbeddingsAreAccounted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		want   typev1.AccountingStatus
	}{
		{"provider answers", http.StatusOK, typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
		{"provider fails", http.StatusServiceUnavailable, typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, requests := embeddingServer(t, tc.status)
			cfg := config.Default()
			cfg.Providers["embedder"] = config.Provider{Type: "openai", BaseURL: url, APIKey: "test-key",
				Models: map[string]config.Model{"embed-test": {Pricing: &config.Pricing{Input: 100}}}}
			cfg.Memory.Embeddings = &config.Target{Provider: "embedder", Model: "embed-test"}
			h := start(t, cfg, llmtest.Scenario{Name: "search", Match: "what do the docs say about deploys?", Turns: []llmtest.Turn{
				call("knowledge_search", `{"query": "deploys"}`), text("The docs say nothing about deploys."),
			}})

			res := h.run(t, &agentv1.RunRequest{Message: "what do the docs say about deploys?"})
			if !res.GetSuccess() {
				t.Fatalf("outcome %s %s (%v), want a success", res.GetOutcome(), res.GetExitReason(), res.GetError())
			}
			checkInvariants(t, res)
			var kinds []string
			attempts := int32(0)
			for _, a := range res.GetAccounting() {
				kinds = append(kinds, strings.TrimPrefix(a.GetType().String(), "ACCOUNTING_TYPE_"))
				if a.GetType() != typev1.AccountingType_ACCOUNTING_TYPE_EMBEDDING {
					continue
				}
				attempts += a.GetAttempts()
				if a.GetStatus() != tc.want || a.GetProvider() != "embedder" || a.GetModel() != "embed-test" ||
					(tc.want == typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED) != (a.GetError() != "") {
					t.Errorf("embedding entry %v, want %s of embedder/embed-test", a, tc.want)
				}
				// 3 prompt tokens at the configured $100 per million; a failed request, 0.
				if want := map[bool]float64{true: 3 * 100 / 1e6}[tc.want == typev1.AccountingStatus_ACCOUNTING_STATUS_OK]; a.GetCostUsd() != want {
					t.Errorf("embedding entry costs %g, want %g", a.GetCostUsd(), want)
				}
			}
			// The memory search of the first turn's context, the turn's LLM attempt, the
			// query embedding of knowledge_search, the tool, the answer.
			if got, want := strings.Join(kinds, " "), "EMBEDDING LLM EMBEDDING TOOL LLM"; got != want {
				t.Errorf("accounting %s, want %s", got, want)
			}
			if n := requests.Load(); attempts != n || n != 2 {
				t.Errorf("embedding entries account %d requests; the provider received %d, want 2", attempts, n)
			}
		})
	}
}

// TestUnreportedUsageCountsAnEstimate: a provider that reports no usage (an OpenAI-compatible
// server may send none) counted 0 tokens for each answer, so the run's usage stayed 0 and
// max_tokens_consumed never ended it. Each answer now counts the generation stage's estimate,
// marked estimated in its accounting entry, its llm_response event and the run's usage, and
// the budget ends the run as with reported usage.
func TestUnreportedUsageCountsAnEstimate(t *testing.T) {
	h := start(t, nil,
		llmtest.Scenario{Name: "no usage", Match: "count what you cannot see", Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression":"1+1"}`}}, NoUsage: true},
			{Content: "It is 2.", NoUsage: true},
		}},
		llmtest.Scenario{Name: "no usage, on a budget", Match: "count on a budget", Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression":"1+1"}`}}, NoUsage: true},
			{Content: "It is 2.", NoUsage: true},
		}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: "count what you cannot see"})
	if !res.GetSuccess() {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	var sum int64
	for _, a := range res.GetAccounting() {
		if a.GetType() != typev1.AccountingType_ACCOUNTING_TYPE_LLM {
			continue
		}
		if u := a.GetTokens(); u.GetInput() == 0 || u.GetOutput() == 0 || !u.GetEstimated() {
			t.Errorf("LLM entry tokens %v, want an estimate of input and output, marked so", u)
		}
		sum += a.GetTokens().GetTotal()
	}
	if u := res.GetUsage(); u.GetTotal() != sum || sum == 0 || !u.GetEstimated() {
		t.Errorf("run usage %v, want the entries' %d tokens, marked estimated", u, sum)
	}
	evs, _ := h.storedEvents(t, res.GetRunId())
	for _, ev := range evs {
		if r := ev.GetLlmResponse(); r != nil && (r.GetUsage().GetTotal() == 0 || !r.GetUsage().GetEstimated()) {
			t.Errorf("llm_response usage %v, want the estimate", r.GetUsage())
		}
	}

	// The first answer's estimate alone is over this budget: the run ends after its turn.
	budget := max(res.GetAccounting()[0].GetTokens().GetTotal()-1, 1)
	res = h.run(t, &agentv1.RunRequest{Message: "count on a budget", Overrides: &agentv1.RunOverrides{MaxTokensConsumed: &budget}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED || res.GetExitReason() != "MAX_TOKENS_REACHED" {
		t.Errorf("outcome %s %s with a budget of %d tokens, want FAILED_BUDGET_EXHAUSTED MAX_TOKENS_REACHED", res.GetOutcome(), res.GetExitReason(), budget)
	}
}

// TestBrokenStreamsCountTheirTokens: a run whose streamed answers break off midway (the
// provider's connection lost after some deltas) fails, but the provider billed every attempt:
// each failed LLM entry carries its tokens, and the run's usage counts them, so that
// max_tokens_consumed sees them. Such attempts counted nothing.
func TestBrokenStreamsCountTheirTokens(t *testing.T) {
	broken := llmtest.Turn{
		Content:   "Paris is the capital of France, on the Seine, with many museums.",
		StreamCut: llmtest.CutDrop,
	}
	h := start(t, nil, llmtest.Scenario{Name: "broken", Match: "tell me about Paris",
		Turns: []llmtest.Turn{broken}})
	overrides := &agentv1.RunOverrides{}
	streamAnswers(overrides)
	res := h.run(t, &agentv1.RunRequest{Message: "tell me about Paris", Overrides: overrides})
	if res.GetSuccess() {
		t.Fatalf("outcome %s, want a failure: every attempt broke off", res.GetOutcome())
	}
	var sum int64
	entries := 0
	for _, a := range res.GetAccounting() {
		if a.GetType() != typev1.AccountingType_ACCOUNTING_TYPE_LLM {
			continue
		}
		entries++
		failed := a.GetStatus() == typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED
		if !failed || a.GetTokens().GetOutput() <= 0 {
			t.Errorf("entry %v, want a failed attempt with the tokens it was billed", a)
		}
		sum += a.GetTokens().GetTotal()
	}
	if entries == 0 || entries != len(h.llm.Requests()) {
		t.Errorf("%d LLM entries for %d provider requests", entries, len(h.llm.Requests()))
	}
	if u := res.GetUsage().GetTotal(); u == 0 || u != sum {
		t.Errorf("run usage %d, want the entries' %d tokens", u, sum)
	}
}

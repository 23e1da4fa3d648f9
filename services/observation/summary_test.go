package observation_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/generation"
	"github.com/agentmesh/agentmesh/services/observation"
)

// summarizing returns an observation stage whose observation model is served by a scripted
// OpenAI-compatible LLM over HTTP through the real generation service, and that LLM.
func summarizing(t *testing.T, opts observation.Options, scenarios ...llmtest.Scenario) (observationv1.ObservationServiceClient, *llmtest.Server) {
	t.Helper()
	llm := llmtest.New(t, scenarios...)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	gen := generation.New(generation.Options{Providers: map[string]generation.Provider{
		"scripted": generation.NewOpenAI(generation.OpenAIOptions{Name: "scripted", BaseURL: llm.URL(), APIKey: "k", HTTPClient: &http.Client{Transport: tr}}),
	}})
	opts.Generation = generationv1.NewGenerationServiceClient(grpctest.Serve(t, gen.Register))
	opts.Model = &typev1.Target{Provider: "scripted", Model: "summarizer"}
	return client(t, opts), llm
}

// TestSummary: a result over max_bytes is summarised by the observation model, which is asked
// with the result as the user message and the budget in its instructions; the observation is
// the summary under its notice, and the request is accounted with stage observation.
func TestSummary(t *testing.T) {
	raw := "row 1: alice 42\n" + strings.Repeat("row n: filler 0\n", 200)
	c, llm := summarizing(t, observation.Options{}, llmtest.Scenario{Name: "summary", Match: raw, Turns: []llmtest.Turn{{Content: "200 rows; alice has 42."}}})
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RunId: "run-1", RawResult: raw, ToolName: "db__query", MaxBytes: 100, Status: success})
	if err != nil {
		t.Fatal(err)
	}
	want := "[SUMMARIZED] Original size 3216 bytes; summarized to 23 bytes by scripted/summarizer.\n200 rows; alice has 42."
	if resp.GetObservation() != want || !resp.GetSummarized() || resp.GetTruncated() || resp.GetSummaryError() != "" || !resp.GetSuccess() {
		t.Fatalf("observation %q summarized %v truncated %v error %q success %v", resp.GetObservation(), resp.GetSummarized(),
			resp.GetTruncated(), resp.GetSummaryError(), resp.GetSuccess())
	}
	reqs := llm.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests to the observation model, want 1", len(reqs))
	}
	if sys := string(reqs[0].Messages[0].Content); !strings.Contains(sys, "db__query") || !strings.Contains(sys, "at most 100 bytes") {
		t.Errorf("instructions %q name neither the tool nor the budget", sys)
	}
	if len(reqs[0].Tools) != 0 || reqs[0].Model != "summarizer" {
		t.Errorf("request offered %d tools to model %q", len(reqs[0].Tools), reqs[0].Model)
	}
	acc := resp.GetAccounting()
	if len(acc) != 1 || acc[0].GetStage() != observation.Stage || acc[0].GetType() != typev1.AccountingType_ACCOUNTING_TYPE_LLM ||
		acc[0].GetModel() != "summarizer" || acc[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK || acc[0].GetTokens().GetTotal() == 0 {
		t.Errorf("accounting %v", acc)
	}

	t.Run("a result within the budget asks no model", func(t *testing.T) {
		before := len(llm.Requests())
		resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: "short", ToolName: "t", MaxBytes: 100, Status: success})
		if err != nil || resp.GetObservation() != "short" || resp.GetSummarized() || len(resp.GetAccounting()) != 0 || len(llm.Requests()) != before {
			t.Errorf("%v %v", resp, err)
		}
	})
}

// TestSummaryFallsBackToTruncation: when the observation model fails, answers nothing,
// answers over the budget, is cut off or stopped by the content filter, the result is
// truncated with the exact notice of seed 000, summary_error says why, and the failed request
// is still accounted.
func TestSummaryFallsBackToTruncation(t *testing.T) {
	raw := func(name string) string { return name + ": " + strings.Repeat("x", 50) }
	table := []struct {
		name string
		turn llmtest.Turn
		why  string
	}{
		{"down", llmtest.Turn{Failure: llmtest.FailModelError}, "the observation model failed"},
		{"empty", llmtest.Turn{Content: "   "}, "answered with no summary"},
		{"too long", llmtest.Turn{Content: strings.Repeat("y", 21)}, "summary of 21 bytes is over the budget of 20 bytes"},
		{"cut off", llmtest.Turn{Content: "partial", FinishReason: "length"}, "cut off at its output token limit"},
		// What the provider's content filter let through is not the model's summary.
		{"filtered", llmtest.Turn{Content: "partial", FinishReason: "content_filter"},
			"the provider's content filter stopped the observation model's summary"},
	}
	var scenarios []llmtest.Scenario
	for _, tc := range table {
		scenarios = append(scenarios, llmtest.Scenario{Name: tc.name, Match: raw(tc.name), Turns: []llmtest.Turn{tc.turn}})
	}
	c, _ := summarizing(t, observation.Options{}, scenarios...)
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			r := raw(tc.name)
			resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: r, ToolName: "t", MaxBytes: 20, Status: success})
			if err != nil {
				t.Fatal(err)
			}
			want := "[TRUNCATED] Original size " + strconv.Itoa(len(r)) + " bytes; truncated to 20 bytes.\n" + r[:20]
			if resp.GetObservation() != want || !resp.GetTruncated() || resp.GetSummarized() {
				t.Errorf("observation %q truncated %v summarized %v, want %q", resp.GetObservation(), resp.GetTruncated(), resp.GetSummarized(), want)
			}
			if !strings.Contains(resp.GetSummaryError(), tc.why) {
				t.Errorf("summary_error %q does not say %q", resp.GetSummaryError(), tc.why)
			}
			if len(resp.GetAccounting()) != 1 {
				t.Errorf("accounting %v, want the request", resp.GetAccounting())
			}
		})
	}
	if got := stateOf(c, t, raw("down")); got != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED {
		t.Errorf("a failed summary is accounted %v", got)
	}
}

// TestSummaryCutOffBeforeAnyContentIsAccounted: a summary model that spends its output token
// limit before it writes anything (reasoning) fails MAX_TOKENS_EXCEEDED, and the result is
// truncated; but the provider answered and charged for it, so the failed request's entry
// carries the tokens it reported, where it had none.
func TestSummaryCutOffBeforeAnyContentIsAccounted(t *testing.T) {
	r := "thinks: " + strings.Repeat("x", 50)
	c, _ := summarizing(t, observation.Options{}, llmtest.Scenario{Name: "thinks", Match: r, Turns: []llmtest.Turn{
		{Reasoning: "Let me see", FinishReason: "length", Usage: &llmtest.Usage{PromptTokens: 40, CompletionTokens: 16}},
	}})
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: r, ToolName: "t", MaxBytes: 20, Status: success})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetTruncated() || !strings.Contains(resp.GetSummaryError(), "output token limit") {
		t.Errorf("truncated %v, summary_error %q, want a truncation for want of a summary", resp.GetTruncated(), resp.GetSummaryError())
	}
	acc := resp.GetAccounting()
	if len(acc) != 1 || acc[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED || acc[0].GetTokens().GetTotal() != 56 || acc[0].GetStopReason() != "length" {
		t.Errorf("accounting %v, want the failed request of the 56 tokens reported", acc)
	}
}

// TestSummaryReadsAtMostItsInput: the observation model reads at most SummaryInputBytes of a
// result, cut at a rune boundary, and is told how much it was shown: the bytes before the cut,
// not SummaryInputBytes (it was told 2 bytes here, and shown 1).
func TestSummaryReadsAtMostItsInput(t *testing.T) {
	raw := "héllo wörld " + strings.Repeat("z", 100)
	c, llm := summarizing(t, observation.Options{SummaryInputBytes: 2}, llmtest.Scenario{Name: "clipped", Match: "h*", Turns: []llmtest.Turn{{Content: "a greeting"}}})
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "t", MaxBytes: 50, Status: success})
	if err != nil || !resp.GetSummarized() {
		t.Fatalf("%v %v", resp, err)
	}
	got := string(llm.Requests()[0].Messages[1].Content)
	if want := "h\n[the output continues: only its first 1 of 114 bytes are shown]"; got != want {
		t.Errorf("the model read %q, want %q", got, want)
	}
}

func stateOf(c observationv1.ObservationServiceClient, t *testing.T, raw string) typev1.AccountingStatus {
	t.Helper()
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "t", MaxBytes: 20, Status: success})
	if err != nil || len(resp.GetAccounting()) != 1 {
		t.Fatalf("%v %v", resp, err)
	}
	return resp.GetAccounting()[0].GetStatus()
}

// TestSlowSummaryFallsBackToTruncation: an observation model that does not answer before the
// caller's deadline leaves the stage time to answer with the truncated result, saying why. The
// summary took all the caller's time, and the caller got DEADLINE_EXCEEDED for a result the
// stage truncates when the model fails (the orchestrator gives the stage 10 s, and a local
// model may take longer to summarise 256 KiB).
func TestSlowSummaryFallsBackToTruncation(t *testing.T) {
	never := make(chan struct{})
	raw := "slow: " + strings.Repeat("x", 50)
	c, llm := summarizing(t, observation.Options{}, llmtest.Scenario{Name: "slow", Match: raw, Turns: []llmtest.Turn{{Content: "late", Hold: never}}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	resp, err := c.Observe(ctx, &observationv1.ObserveRequest{RawResult: raw, ToolName: "t", MaxBytes: 20, Status: success})
	if err != nil {
		t.Fatalf("%v, want the result truncated", err)
	}
	want := "[TRUNCATED] Original size " + strconv.Itoa(len(raw)) + " bytes; truncated to 20 bytes.\n" + raw[:20]
	if resp.GetObservation() != want || !resp.GetTruncated() || resp.GetSummarized() || !strings.Contains(resp.GetSummaryError(), "did not answer in time") {
		t.Errorf("observation %q truncated %v summarized %v summary_error %q", resp.GetObservation(), resp.GetTruncated(), resp.GetSummarized(), resp.GetSummaryError())
	}
	if acc := resp.GetAccounting(); len(acc) != 1 || acc[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED {
		t.Errorf("accounting %v, want the abandoned request as failed", acc)
	}
	if len(llm.Requests()) != 1 {
		t.Errorf("%d requests to the observation model, want 1", len(llm.Requests()))
	}
}

// TestSummaryFitsTheModelsWindow: the observation model's request fits its configured limits
// (providers.*.models.*: context_window, context_window_buffer_tokens, max_output_tokens).
// It was sent SummaryInputBytes (256 KiB) of any result and max_tokens of a third of the
// budget, over a small model's window, whose provider refused it: no summary was ever made.
// Now the result is cut to the tokens the window leaves, and max_tokens is the model's.
func TestSummaryFitsTheModelsWindow(t *testing.T) {
	cfg := config.Default()
	cfg.Providers = map[string]config.Provider{"scripted": {Type: "openai", BaseURL: "http://unused", APIKey: "k",
		Models: map[string]config.Model{"summarizer": {ContextWindow: 2000, ContextWindowBufferTokens: 100, MaxOutputTokens: 300}}}}
	cfg.Models.Observation = &config.Target{Provider: "scripted", Model: "summarizer"}
	opts := observation.OptionsFromConfig(cfg)
	raw := "row 1: alice 42\n" + strings.Repeat("row n: filler 0\n", 4000)
	c, llm := summarizing(t, opts, llmtest.Scenario{Name: "summary", Match: "row 1*", Turns: []llmtest.Turn{{Content: "4001 rows; alice has 42."}}})
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "db__query", MaxBytes: 12 << 10, Status: success})
	if err != nil || !resp.GetSummarized() {
		t.Fatalf("%v %v", resp, err)
	}
	req := llm.Requests()[0]
	if req.MaxTokens == nil || *req.MaxTokens != 300 {
		t.Errorf("max_tokens %s, want the model's max_output_tokens, 300", req.Raw["max_tokens"])
	}
	msgs := []*typev1.Message{
		{Role: typev1.Role_ROLE_SYSTEM, Content: string(req.Messages[0].Content)},
		{Role: typev1.Role_ROLE_USER, Content: string(req.Messages[1].Content)},
	}
	if n := tokens.ForModel("summarizer").Messages(msgs); n+100+300 > 2000 {
		t.Errorf("the request's %d tokens with 100 of buffer and 300 of output exceed the window of 2000", n)
	}
	if !strings.Contains(string(req.Messages[1].Content), "[the output continues: only its first ") {
		t.Errorf("the model was not told the output continues")
	}

	t.Run("a window that leaves no room for the result", func(t *testing.T) {
		cfg.Providers["scripted"].Models["summarizer"] = config.Model{ContextWindow: 500, ContextWindowBufferTokens: 100, MaxOutputTokens: 300}
		c, llm := summarizing(t, observation.OptionsFromConfig(cfg))
		resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "t", MaxBytes: 1 << 10, Status: success})
		if err != nil || !resp.GetTruncated() || len(llm.Requests()) != 0 {
			t.Fatalf("%v %v; %d requests, want none", resp, err, len(llm.Requests()))
		}
		if e := resp.GetSummaryError(); !strings.Contains(e, "context window of 500 tokens") || !strings.Contains(e, "scripted/summarizer") {
			t.Errorf("summary_error %q does not name the model and its window", e)
		}
	})
}

package generation_test

import (
	"math"
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/generation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// brokenAnswer is the answer the provider breaks off in the middle of.
const brokenAnswer = "The capital of France is Paris, a city on the Seine with many museums."

// TestStreamBrokenAfterOutputAccountsItsTokens: a streamed answer that breaks off after some of
// it arrived (the connection lost, or an error event after some deltas) fails, but the provider
// billed what it generated: the failure's accounting entry carries the tokens (the provider's
// usage where it sent any, Anthropic's input count at message_start, else the estimate of the
// prompt and of the text received) and their cost, and the token and cost metrics count them,
// so budgets see them. Such an attempt counted no tokens.
func TestStreamBrokenAfterOutputAccountsItsTokens(t *testing.T) {
	cfg := config.Default()
	priced := map[string]config.Model{"m": {Pricing: &config.Pricing{Input: 2, Output: 8}}}
	cfg.Providers["openai"] = config.Provider{Type: "openai", Models: priced}
	cfg.Providers["anthropic"] = config.Provider{Type: "anthropic", Models: priced}
	for _, tc := range []struct {
		name, provider, cut string
		usage               *llmtest.Usage
		wantInput           int64 // 0: estimated
	}{
		{name: "openai connection lost", provider: "openai", cut: llmtest.CutDrop},
		{name: "openai error event", provider: "openai", cut: llmtest.CutError},
		{name: "anthropic connection lost", provider: "anthropic", cut: llmtest.CutDrop,
			usage: &llmtest.Usage{PromptTokens: 40, CompletionTokens: 300}, wantInput: 40},
		{name: "anthropic error event", provider: "anthropic", cut: llmtest.CutError,
			usage: &llmtest.Usage{PromptTokens: 40, CompletionTokens: 300}, wantInput: 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
				Content: brokenAnswer, StreamCut: tc.cut, Usage: tc.usage,
			}}})
			reader := sdkmetric.NewManualReader()
			provider := openAIAt(t, srv.URL(), nil)
			if tc.provider == "anthropic" {
				provider = anthropicAt(t, srv.URL(), nil)
			}
			client := serve(t, generation.Options{
				Providers:     map[string]generation.Provider{tc.provider: provider},
				Prices:        generation.PricesFromConfig(cfg),
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
			})
			req := request(tc.provider, "m", user("What is the capital of France?"))
			deltas, final, err := streamAll(t, client, req)
			if err == nil || final != nil {
				t.Fatalf("final %v err %v, want the stream to fail", final, err)
			}
			received := ""
			for _, d := range deltas {
				received += d.GetContent()
			}
			if partial := strings.HasPrefix(brokenAnswer, received); !partial ||
				received == "" || received == brokenAnswer {
				t.Fatalf("received %q, want a part of the answer", received)
			}
			se := stageerr.FromError(err)
			if len(se.Accounting) != 1 {
				t.Fatalf("%v: accounting %v, want the attempt's entry", err, se.Accounting)
			}
			e := se.Accounting[0]
			u := e.GetTokens()
			if tc.wantInput > 0 && u.GetInput() != tc.wantInput || u.GetInput() <= 0 {
				t.Errorf("input tokens %d, want %d (0: estimated)", u.GetInput(), tc.wantInput)
			}
			if u.GetOutput() < int64(len(received)/4) || u.GetOutput() >= 300 || !u.GetEstimated() {
				t.Errorf("output tokens %v, want the estimate of %q", u, received)
			}
			want := float64(u.GetInput()*2+u.GetOutput()*8) / 1e6
			if e.GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED ||
				e.GetAttempts() != 1 || math.Abs(e.GetCostUsd()-want) > 1e-12 ||
				e.GetError() == "" {
				t.Errorf("entry %v, want a failed attempt costing %g", e, want)
			}
			p := points(t, reader)
			var input, output float64
			for attrs, d := range p["gen_ai.client.token.usage"] {
				switch {
				case strings.Contains(attrs, "gen_ai.token.type=input"):
					input += d[1]
				case strings.Contains(attrs, "gen_ai.token.type=output"):
					output += d[1]
				}
			}
			if input != float64(u.GetInput()) || output != float64(u.GetOutput()) {
				t.Errorf("token metrics input %g output %g, want %v", input, output, u)
			}
			var cost float64
			for _, d := range p[generation.MetricCost] {
				cost += d[0]
			}
			if math.Abs(cost-want) > 1e-12 {
				t.Errorf("cost metric %g, want %g", cost, want)
			}
		})
	}
}

// TestAnswerFailedMidwayAccountsItsUsage: a non-streamed answer that reports it failed while
// the model generated it (finish_reason "error", as OpenRouter and vLLM send) fails SERVER, but
// its body reports the usage the provider billed: the failure's accounting carries it and its
// cost, as a streamed answer that broke off does. It counted no tokens.
func TestAnswerFailedMidwayAccountsItsUsage(t *testing.T) {
	cfg := config.Default()
	cfg.Providers["openai"] = config.Provider{Type: "openai", Models: map[string]config.Model{
		"m": {Pricing: &config.Pricing{Input: 2, Output: 8}},
	}}
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
		Content: "The capital of France is", FinishReason: "error",
		Usage: &llmtest.Usage{PromptTokens: 40, CompletionTokens: 16},
	}}})
	client := serve(t, generation.Options{
		Providers: map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)},
		Prices:    generation.PricesFromConfig(cfg),
	})
	_, err := client.Generate(t.Context(), request("openai", "m", user("The capital of France?")))
	se := stageerr.FromError(err)
	if se == nil || se.Class != typev1.ErrorClass_ERROR_CLASS_SERVER {
		t.Fatalf("error %v, want SERVER", err)
	}
	if len(se.Accounting) != 1 {
		t.Fatalf("accounting %v, want the attempt's entry", se.Accounting)
	}
	e, want := se.Accounting[0], (40*2+16*8)/1e6
	u := e.GetTokens()
	if u.GetInput() != 40 || u.GetOutput() != 16 || u.GetEstimated() ||
		math.Abs(e.GetCostUsd()-want) > 1e-12 {
		t.Errorf("entry %v, want the reported 40 + 16 tokens costing %g", e, want)
	}
}

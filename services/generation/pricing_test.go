package generation_test

import (
	"cmp"
	"math"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc/codes"
)

// TestCostFromConfiguredPrices (issue 11.7): an answer costs its uncached input, cached input
// and output tokens at the configured price of the model the provider reports, else of the
// model requested; cached input without a price of its own costs the input price; a model
// without a price, and an answer from the response cache, cost 0.
func TestCostFromConfiguredPrices(t *testing.T) {
	cfg := config.Default()
	cfg.Providers["openai"] = config.Provider{Type: "openai", Models: map[string]config.Model{
		"gpt-alias":            {Pricing: &config.Pricing{Input: 2, Output: 8, CachedInput: ptr(0.5)}},
		"gpt-alias-2025-01-01": {Pricing: &config.Pricing{Input: 3, Output: 12}},
		"gpt-plain":            {Pricing: &config.Pricing{Input: 1, Output: 4}},
	}}
	usage := &llmtest.Usage{PromptTokens: 1000, CompletionTokens: 500, CachedTokens: 400}
	for _, tc := range []struct {
		name, model, reported string
		want                  float64
	}{
		{"the requested model's price", "gpt-alias", "", (600*2 + 400*0.5 + 500*8) / 1e6},
		{"the reported model's price wins", "gpt-alias", "gpt-alias-2025-01-01", (600*3 + 400*3 + 500*12) / 1e6},
		{"the requested price when the reported model has none", "gpt-plain", "gpt-plain-0125", (1000*1 + 500*4) / 1e6},
		{"no price", "gpt-free", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok", Model: tc.reported, Usage: usage}}})
			client := serve(t, generation.Options{
				Providers: map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)},
				Prices:    generation.PricesFromConfig(cfg),
			})
			req := request("openai", tc.model, user("x"))
			req.UseCache = true
			resp, err := client.Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(resp.GetCostUsd()-tc.want) > 1e-12 {
				t.Errorf("cost_usd = %g, want %g", resp.GetCostUsd(), tc.want)
			}
			if want := cmp.Or(tc.reported, tc.model); resp.GetModel() != want {
				t.Errorf("model = %q, want %q", resp.GetModel(), want)
			}
			hit, err := client.Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !hit.GetCached() || hit.GetCostUsd() != 0 {
				t.Errorf("cache hit: cached %v cost_usd %g, want a free cached answer", hit.GetCached(), hit.GetCostUsd())
			}
			var streamed *generationv1.GenerateResponse
			if _, streamed, err = streamAll(t, client, request("openai", tc.model, user("x"))); err != nil {
				t.Fatal(err)
			}
			if math.Abs(streamed.GetCostUsd()-tc.want) > 1e-12 {
				t.Errorf("streamed cost_usd = %g, want %g", streamed.GetCostUsd(), tc.want)
			}
		})
	}
}

// TestCacheWritesCostTheirOwnPrice: prompt tokens an Anthropic answer wrote to the prompt cache
// (cache_creation_input_tokens) cost the model's cache_write price, by default 1.25 times its
// input price (Anthropic bills a write to its 5-minute cache so), streamed or not. They cost
// the input price, so every answer that filled the cache was costed below its bill.
func TestCacheWritesCostTheirOwnPrice(t *testing.T) {
	cfg := config.Default()
	cfg.Providers["anthropic"] = config.Provider{Type: "anthropic", Models: map[string]config.Model{
		"claude-default": {Pricing: &config.Pricing{Input: 3, Output: 15, CachedInput: ptr(0.3)}},
		"claude-hour":    {Pricing: &config.Pricing{Input: 3, Output: 15, CachedInput: ptr(0.3), CacheWrite: ptr(6.0)}},
	}}
	// Of 1000 prompt tokens, 400 read from the cache and 200 written to it; 500 answered.
	usage := &llmtest.Usage{PromptTokens: 1000, CompletionTokens: 500, CachedTokens: 400, CacheWriteTokens: 200}
	for model, want := range map[string]float64{
		"claude-default": (400*3 + 400*0.3 + 200*3.75 + 500*15) / 1e6,
		"claude-hour":    (400*3 + 400*0.3 + 200*6 + 500*15) / 1e6,
	} {
		t.Run(model, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok", Usage: usage}}})
			client := serve(t, generation.Options{
				Providers: map[string]generation.Provider{"anthropic": anthropicAt(t, srv.URL(), nil)},
				Prices:    generation.PricesFromConfig(cfg),
			})
			resp, err := client.Generate(t.Context(), request("anthropic", model, user("x")))
			if err != nil {
				t.Fatal(err)
			}
			if u := resp.GetUsage(); u.GetInput() != 1000 || u.GetCached() != 400 {
				t.Errorf("usage %v, want 1000 input tokens, 400 of them cached", u)
			}
			if math.Abs(resp.GetCostUsd()-want) > 1e-12 {
				t.Errorf("cost_usd = %g, want %g", resp.GetCostUsd(), want)
			}
			_, streamed, err := streamAll(t, client, request("anthropic", model, user("x")))
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(streamed.GetCostUsd()-want) > 1e-12 {
				t.Errorf("streamed cost_usd = %g, want %g", streamed.GetCostUsd(), want)
			}
		})
	}
}

// TestAnswerCutOffBeforeAnyContentCostsWhatWasBilled: an answer cut off at the output token
// limit before any content fails (MAX_TOKENS_EXCEEDED), but the provider answered and billed
// it: the failure's accounting entry carries its tokens, the model that answered and its cost,
// as the proto and the README say of a failed attempt with an answer.
func TestAnswerCutOffBeforeAnyContentCostsWhatWasBilled(t *testing.T) {
	cfg := config.Default()
	cfg.Providers["openai"] = config.Provider{Type: "openai", Models: map[string]config.Model{
		"gpt-test": {Pricing: &config.Pricing{Input: 2, Output: 8}},
	}}
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Reasoning: "Let me see", FinishReason: "length",
		Model: "gpt-test-2025-01-01", Usage: &llmtest.Usage{PromptTokens: 40, CompletionTokens: 16}}}})
	client := serve(t, generation.Options{
		Providers: map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)},
		Prices:    generation.PricesFromConfig(cfg),
	})
	_, err := client.Generate(t.Context(), request("openai", "gpt-test", user("x")))
	se := stageError(t, err, codes.ResourceExhausted)
	if len(se.Accounting) != 1 {
		t.Fatalf("accounting %v, want the answer's entry", se.Accounting)
	}
	e, want := se.Accounting[0], (40*2+16*8)/1e6
	if e.GetTokens().GetTotal() != 56 || e.GetActualModel() != "gpt-test-2025-01-01" || math.Abs(e.GetCostUsd()-want) > 1e-12 {
		t.Errorf("entry %v, want 56 tokens of gpt-test-2025-01-01 costing %g", e, want)
	}
}

// TestEmbeddingsCostTheirInputPrice: an embeddings request costs its input tokens at the
// configured input price of the model that answered, else of the model requested; a model
// without a price costs 0, and agentmesh.generation.cost_usd counts the cost. Every embeddings
// answer cost 0, so the EMBEDDING entries of a run's accounting (a memory search's query,
// knowledge_search, learning's facts) said they were free; the counter then left it out.
func TestEmbeddingsCostTheirInputPrice(t *testing.T) {
	cfg := config.Default()
	cfg.Providers["openai"] = config.Provider{Type: "openai", Models: map[string]config.Model{
		"embed-priced": {Pricing: &config.Pricing{Input: 0.5, Output: 100}},
	}}
	srv := llmtest.New(t)
	reader := sdkmetric.NewManualReader()
	client := serve(t, generation.Options{
		Providers:     map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)},
		Prices:        generation.PricesFromConfig(cfg),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	inputs := []string{"first text to embed", "the second text to embed"}
	var cost float64
	for model, priced := range map[string]bool{"embed-priced": true, "embed-free": false} {
		resp, err := client.Embed(t.Context(), &generationv1.EmbedRequest{
			Target: &typev1.Target{Provider: "openai", Model: model}, Inputs: inputs,
		})
		if err != nil {
			t.Fatal(err)
		}
		want := 0.0
		if priced {
			want = float64(resp.GetUsage().GetInput()) * 0.5 / 1e6
		}
		if resp.GetUsage().GetInput() == 0 || math.Abs(resp.GetCostUsd()-want) > 1e-15 {
			t.Errorf("%s: usage %v cost_usd %g, want %g", model, resp.GetUsage(), resp.GetCostUsd(), want)
		}
		if priced {
			cost = want
		}
	}
	// agentmesh_generation_cost_usd_total counts what the embeddings cost, as the README's
	// table says; it counted chat answers only.
	costs := points(t, reader)[generation.MetricCost]
	priced := costs["gen_ai.provider.name=openai,gen_ai.request.model=embed-priced,"]
	if len(priced) != 1 || math.Abs(priced[0]-cost) > 1e-15 {
		t.Errorf("%s %v, want %g for embed-priced", generation.MetricCost, costs, cost)
	}
}

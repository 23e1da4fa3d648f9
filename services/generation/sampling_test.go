package generation_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"go.opentelemetry.io/otel/attribute"
)

// configured serves the providers ProvidersFromConfig builds from cfg.
func configured(t *testing.T, cfg *config.Config, opts generation.Options) generationv1.GenerationServiceClient {
	t.Helper()
	providers, err := generation.ProvidersFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Providers = providers
	return serve(t, opts)
}

func TestSamplingFromConfig(t *testing.T) {
	intp := func(v int) *int { return &v }
	cases := []struct {
		name     string
		provider string
		model    string
		sampling *generationv1.Sampling // the caller's
		expect   llmtest.Expect
		absent   []string
	}{
		{
			name: "provider settings", provider: "oai", model: "gpt-small",
			expect: llmtest.Expect{Temperature: ptr(0.3), TopP: ptr(0.8), ReasoningEffort: "low"},
			absent: []string{"max_tokens", "stop"},
		},
		{
			name: "model settings override the provider's field by field", provider: "oai", model: "gpt-big",
			expect: llmtest.Expect{Temperature: ptr(0.7), TopP: ptr(0.8), ReasoningEffort: "high", MaxTokens: intp(2048)},
		},
		{
			name: "the caller's fields win", provider: "oai", model: "gpt-big",
			sampling: &generationv1.Sampling{Temperature: ptr(0.1), MaxOutputTokens: 100, Stop: []string{"END"}},
			expect:   llmtest.Expect{Temperature: ptr(0.1), TopP: ptr(0.8), ReasoningEffort: "high", MaxTokens: intp(100), Stop: []string{"END"}},
		},
		{
			name: "a configured zero temperature is sent", provider: "oai", model: "gpt-zero",
			expect: llmtest.Expect{Temperature: ptr(0.0), TopP: ptr(0.8), ReasoningEffort: "low"},
		},
		{
			name: "a caller's zero temperature wins over the configured one", provider: "oai", model: "gpt-big",
			sampling: &generationv1.Sampling{Temperature: ptr(0.0)},
			expect:   llmtest.Expect{Temperature: ptr(0.0)},
		},
		{
			name: "anthropic: effort becomes the thinking budget within the model's max tokens", provider: "claude", model: "claude-big",
			expect: llmtest.Expect{Temperature: ptr(1.0), MaxTokens: intp(16000), ThinkingBudget: intp(4096)},
			absent: []string{"top_p"},
		},
		{
			name: "anthropic: a caller's effort wins", provider: "claude", model: "claude-big",
			sampling: &generationv1.Sampling{ReasoningEffort: "high"},
			expect:   llmtest.Expect{MaxTokens: intp(16000), ThinkingBudget: intp(15999)},
		},
		{
			name: "no configured sampling sends none", provider: "plain", model: "m",
			absent: []string{"temperature", "top_p", "max_tokens", "reasoning_effort"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok", Expect: &tc.expect}}})
			cfg := &config.Config{Providers: map[string]config.Provider{
				"oai": {
					Type: config.ProviderOpenAI, BaseURL: srv.URL(), Temperature: ptr(0.3), TopP: ptr(0.8), ReasoningEffort: "low",
					Models: map[string]config.Model{
						"gpt-big":  {Temperature: ptr(0.7), ReasoningEffort: "high", MaxOutputTokens: 2048},
						"gpt-zero": {Temperature: ptr(0.0)},
						"gpt-ctx":  {ContextWindow: 8000}, // no sampling: inherits everything
					},
				},
				"claude": {
					Type: config.ProviderAnthropic, BaseURL: srv.URL(), ReasoningEffort: "medium",
					Models: map[string]config.Model{"claude-big": {Temperature: ptr(1.0), MaxOutputTokens: 16000}},
				},
				"plain": {Type: config.ProviderOpenAI, BaseURL: srv.URL()},
			}}
			client := configured(t, cfg, generation.Options{})
			req := request(tc.provider, tc.model, user("x"))
			req.Sampling = tc.sampling
			if _, err := client.Generate(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			got := srv.Requests()[0]
			for _, field := range tc.absent {
				if got.Has(field) {
					t.Errorf("%s = %s, want it absent", field, got.Raw[field])
				}
			}
		})
	}
}

// TestSessionSamplingDefaults loads the configuration with the real loader: defaults'
// temperature, top_p and reasoning_effort are the session-level sampling of seed 000 §1, sent
// with every request to a provider and model that set none, and overridden per provider or
// per model, field by field.
func TestSessionSamplingDefaults(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok"}}})
	path := filepath.Join(t.TempDir(), config.FileName)
	yaml := "defaults: {temperature: 0.4, top_p: 0.9, reasoning_effort: low}\n" +
		"providers:\n" +
		"  plain: {type: openai, base_url: '" + srv.URL() + "'}\n" +
		"  tuned:\n" +
		"    type: openai\n" +
		"    base_url: '" + srv.URL() + "'\n" +
		"    temperature: 0.2\n" +
		"    models: {m2: {top_p: 0.5}}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadLayers([]config.Layer{{Name: "explicit", Path: path, Required: true}})
	if err != nil {
		t.Fatal(err)
	}
	client := configured(t, cfg, generation.Options{})
	cases := []struct {
		provider, model string
		temperature     float64
		topP            float64
	}{
		{"plain", "m", 0.4, 0.9},  // the session's
		{"tuned", "m", 0.2, 0.9},  // the provider's temperature
		{"tuned", "m2", 0.2, 0.5}, // and the model's top_p
	}
	for i, c := range cases {
		if _, err := client.Generate(t.Context(), request(c.provider, c.model, user("x"))); err != nil {
			t.Fatal(err)
		}
		got := srv.Requests()[i]
		if got.Temperature == nil || *got.Temperature != c.temperature || got.TopP == nil || *got.TopP != c.topP ||
			got.ReasoningEffort != "low" {
			t.Errorf("%s/%s sent temperature %s, top_p %s, reasoning_effort %s; want %g, %g, low",
				c.provider, c.model, got.Raw["temperature"], got.Raw["top_p"], got.Raw["reasoning_effort"], c.temperature, c.topP)
		}
	}
}

func TestConfiguredSamplingInSpans(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok"}}})
	tp, rec := recorder(t)
	cfg := &config.Config{Providers: map[string]config.Provider{
		"oai": {Type: config.ProviderOpenAI, BaseURL: srv.URL(), TopP: ptr(0.5), Models: map[string]config.Model{"m": {MaxOutputTokens: 300}}},
	}}
	client := configured(t, cfg, generation.Options{TracerProvider: tp})
	if _, err := client.Generate(t.Context(), request("oai", "m", user("x"))); err != nil {
		t.Fatal(err)
	}
	a := attrs(rec.Ended()[0])
	if a["gen_ai.request.top_p"] != attribute.Float64Value(0.5) || a["gen_ai.request.max_tokens"] != attribute.Int64Value(300) {
		t.Errorf("span attributes = %v", a)
	}
}

func TestProvidersFromConfig(t *testing.T) {
	providers, err := generation.ProvidersFromConfig(&config.Config{Providers: map[string]config.Provider{
		"r":      {Type: config.ProviderRules},
		"claude": {Type: config.ProviderAnthropic, BaseURL: "https://api.anthropic.com/v1", TimeoutMS: 1000},
		"local":  {Type: config.ProviderOpenAI, BaseURL: "http://localhost:11434/v1", Temperature: ptr(0.2)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"r": "rules", "claude": "claude", "local": "local"} {
		if p := providers[name]; p == nil || p.Name() != want {
			t.Errorf("provider %q = %v, want name %q", name, p, want)
		}
	}
	d, ok := providers["local"].(generation.SamplingDefaulter)
	if !ok || d.DefaultSampling("any").GetTemperature() != 0.2 {
		t.Errorf("local provider carries no sampling defaults")
	}
	if _, ok := providers["claude"].(generation.SamplingDefaulter); ok {
		t.Error("a provider without sampling settings must not be wrapped")
	}

	_, err = generation.ProvidersFromConfig(&config.Config{Providers: map[string]config.Provider{"x": {Type: "gemini"}}})
	if err == nil || !strings.Contains(err.Error(), `provider "x": type "gemini" is not supported`) || exitcode.Of(err) != exitcode.Invalid {
		t.Errorf("error = %v", err)
	}
}

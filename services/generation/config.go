package generation

import (
	"fmt"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/server"
)

// DrainTimeout is how long a stopping generation stage lets its calls in flight finish by
// default (pkg/server.WithDrainTimeout): a model's answer, streamed or not, asked at the start
// of a turn, which may take the default step timeout (defaults.step_timeout_ms), and
// server.DrainMargin to send it. Cut off sooner, the answer is lost and asked (and paid for) again by
// the retry; a run given a longer step_timeout_ms may still have its answer cut off at the
// drain's end.
func DrainTimeout(cfg *config.Config) time.Duration {
	return server.DrainFor(time.Duration(cfg.Defaults.StepTimeoutMS) * time.Millisecond)
}

// ProvidersFromConfig builds the providers the configuration names: openai (any
// OpenAI-compatible server, with its token_limit_field), anthropic and rules. A provider's
// temperature, top_p and reasoning_effort, and its models' temperature, top_p,
// reasoning_effort and max_output_tokens, become its SamplingDefaults (WithSampling): per
// field, the request's value wins, then the model's, then the provider's, then the session's
// (defaults.temperature, top_p and reasoning_effort, seed 000 §1). An unknown provider
// type is a configuration error (exit code 4) naming the provider. The models' pricing is
// read by PricesFromConfig.
func ProvidersFromConfig(cfg *config.Config) (map[string]Provider, error) {
	out := make(map[string]Provider, len(cfg.Providers))
	for name, p := range cfg.Providers {
		timeout := time.Duration(p.TimeoutMS) * time.Millisecond
		var provider Provider
		switch p.Type {
		case config.ProviderRules:
			provider = NewRules()
		case config.ProviderOpenAI:
			provider = NewOpenAI(OpenAIOptions{Name: name, BaseURL: p.BaseURL, APIKey: p.APIKey, Headers: p.Headers, Timeout: timeout,
				TokenLimitField: p.TokenLimitField})
		case config.ProviderAnthropic:
			provider = NewAnthropic(AnthropicOptions{Name: name, BaseURL: p.BaseURL, APIKey: p.APIKey, Headers: p.Headers, Timeout: timeout})
		default:
			return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("provider %q: type %q is not supported (use %s, %s or %s)",
				name, p.Type, config.ProviderOpenAI, config.ProviderAnthropic, config.ProviderRules))
		}
		if d, ok := samplingDefaults(p, cfg.Defaults); ok {
			provider = WithSampling(provider, d)
		}
		out[name] = provider
	}
	return out, nil
}

// samplingDefaults reads a provider's configured sampling, over the session's (the
// configuration's defaults, seed 000 §1) field by field; false when nothing is set.
func samplingDefaults(p config.Provider, session config.Defaults) (SamplingDefaults, bool) {
	d := SamplingDefaults{Provider: mergeSampling(&generationv1.Sampling{
		Temperature: p.Temperature, TopP: p.TopP, ReasoningEffort: p.ReasoningEffort,
	}, &generationv1.Sampling{
		Temperature: session.Temperature, TopP: session.TopP, ReasoningEffort: session.ReasoningEffort,
	})}
	for model, m := range p.Models {
		s := mergeSampling(&generationv1.Sampling{
			Temperature: m.Temperature, TopP: m.TopP, ReasoningEffort: m.ReasoningEffort, MaxOutputTokens: m.MaxOutputTokens,
		})
		if s == nil {
			continue
		}
		if d.Models == nil {
			d.Models = map[string]*generationv1.Sampling{}
		}
		d.Models[model] = s
	}
	return d, d.Provider != nil || len(d.Models) > 0
}

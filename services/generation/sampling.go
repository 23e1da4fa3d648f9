package generation

import (
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"google.golang.org/protobuf/proto"
)

// SamplingDefaults are the sampling parameters configured for one provider. Precedence is
// field by field: a field the request's Sampling sets wins; else the model's entry in Models;
// else Provider; else the field is not sent. A field is set when temperature or top_p is
// present (0 included), max_output_tokens is above 0, reasoning_effort is not empty, or stop
// has entries.
type SamplingDefaults struct {
	// Provider applies to every model of the provider: its own settings over the session's
	// (the configuration's defaults).
	Provider *generationv1.Sampling
	// Models override Provider for one model, by model name.
	Models map[string]*generationv1.Sampling
}

// SamplingDefaulter is a provider that carries configured sampling defaults; the service
// merges them into every request (see SamplingDefaults for the precedence).
type SamplingDefaulter interface {
	// DefaultSampling returns the configured sampling of model, or nil.
	DefaultSampling(model string) *generationv1.Sampling
}

// WithSampling returns p carrying the sampling defaults d; the service applies them to every
// Generate and GenerateStream call that targets p.
func WithSampling(p Provider, d SamplingDefaults) Provider {
	return &sampledProvider{Provider: p, defaults: d}
}

// sampledProvider is a provider with configured sampling defaults.
type sampledProvider struct {
	Provider
	defaults SamplingDefaults
}

// DefaultSampling returns the model's settings over the provider's.
func (p *sampledProvider) DefaultSampling(model string) *generationv1.Sampling {
	return mergeSampling(p.defaults.Models[model], p.defaults.Provider)
}

// effectiveSampling is the sampling a call sends: the request's fields over the provider's
// configured defaults for the model.
func effectiveSampling(p Provider, model string, requested *generationv1.Sampling) *generationv1.Sampling {
	d, ok := p.(SamplingDefaulter)
	if !ok {
		return requested
	}
	return mergeSampling(requested, d.DefaultSampling(model))
}

// mergeSampling combines layers field by field, the first layer that sets a field winning;
// nil when no layer sets anything.
func mergeSampling(layers ...*generationv1.Sampling) *generationv1.Sampling {
	out := &generationv1.Sampling{}
	for _, l := range layers {
		if l == nil {
			continue
		}
		if out.Temperature == nil && l.Temperature != nil {
			out.Temperature = proto.Float64(l.GetTemperature())
		}
		if out.TopP == nil && l.TopP != nil {
			out.TopP = proto.Float64(l.GetTopP())
		}
		if out.MaxOutputTokens <= 0 {
			out.MaxOutputTokens = l.GetMaxOutputTokens()
		}
		if out.ReasoningEffort == "" {
			out.ReasoningEffort = l.GetReasoningEffort()
		}
		if len(out.Stop) == 0 {
			out.Stop = append([]string(nil), l.GetStop()...)
		}
	}
	if proto.Equal(out, &generationv1.Sampling{}) {
		return nil
	}
	return out
}

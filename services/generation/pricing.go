package generation

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
)

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	// Input is the price of a prompt token not read from the provider's prompt cache.
	Input float64
	// Output is the price of a completion token.
	Output float64
	// CachedInput is the price of a prompt token read from the provider's prompt cache.
	CachedInput float64
	// CacheWrite is the price of a prompt token written to the provider's prompt cache.
	CacheWrite float64
}

// cacheWriteRate is the price of a prompt token written to the provider's cache, as a multiple
// of the input price, when the model's pricing gives none: Anthropic's 5-minute cache writes.
const cacheWriteRate = 1.25

// Prices are model prices by provider name, then by model name.
type Prices map[string]map[string]Price

// PricesFromConfig reads the pricing of every configured model; a model without pricing has
// no price (its answers cost 0), cached input without a price of its own costs Input, and a
// cache write without one costs cacheWriteRate times Input.
func PricesFromConfig(cfg *config.Config) Prices {
	out := Prices{}
	for provider, p := range cfg.Providers {
		for model, m := range p.Models {
			if m.Pricing == nil {
				continue
			}
			price := Price{Input: m.Pricing.Input, Output: m.Pricing.Output, CachedInput: m.Pricing.Input, CacheWrite: cacheWriteRate * m.Pricing.Input}
			if m.Pricing.CachedInput != nil {
				price.CachedInput = *m.Pricing.CachedInput
			}
			if m.Pricing.CacheWrite != nil {
				price.CacheWrite = *m.Pricing.CacheWrite
			}
			if out[provider] == nil {
				out[provider] = map[string]Price{}
			}
			out[provider][model] = price
		}
	}
	return out
}

// cost is the price of usage under provider's price for the model the provider reports it
// answered with, else for the model requested; 0 when neither has a price. The canonical
// usage counts every prompt token in Input and those read from the cache also in Cached;
// written counts those of them written to the cache (Usage.CacheWrite).
func (p Prices) cost(provider, reported, requested string, u *typev1.TokenUsage, written int64) float64 {
	price, ok := p[provider][reported]
	if !ok {
		if price, ok = p[provider][requested]; !ok {
			return 0
		}
	}
	uncached := max(u.GetInput()-u.GetCached()-written, 0)
	return (float64(uncached)*price.Input + float64(u.GetCached())*price.CachedInput + float64(written)*price.CacheWrite +
		float64(u.GetOutput())*price.Output) / 1e6
}

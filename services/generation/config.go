package generation

import (
	"fmt"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// ProvidersFromConfig builds the providers the configuration names. A provider type that is
// not implemented yet is a configuration error (exit code 4) naming the provider.
func ProvidersFromConfig(cfg *config.Config) (map[string]Provider, error) {
	out := make(map[string]Provider, len(cfg.Providers))
	for name, p := range cfg.Providers {
		switch p.Type {
		case config.ProviderRules:
			out[name] = NewRules()
		case config.ProviderOpenAI:
			out[name] = NewOpenAI(OpenAIOptions{
				Name: name, BaseURL: p.BaseURL, APIKey: p.APIKey, Headers: p.Headers,
				Timeout: time.Duration(p.TimeoutMS) * time.Millisecond,
			})
		default:
			return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("provider %q: type %q is not supported yet (use %s or %s)",
				name, p.Type, config.ProviderOpenAI, config.ProviderRules))
		}
	}
	return out, nil
}

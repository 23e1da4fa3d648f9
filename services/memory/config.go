package memory

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// OptionsFromConfig builds the service's options from the configuration's memory section.
// Only the in-memory store exists so far; asking for another is a configuration error.
func OptionsFromConfig(cfg *config.Config) (Options, error) {
	switch cfg.Memory.Store {
	case "", config.StoreMemory:
		return Options{QuotaPerUser: cfg.Memory.QuotaPerUser}, nil
	}
	return Options{}, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("memory store %q is not supported yet (use %q)", cfg.Memory.Store, config.StoreMemory))
}

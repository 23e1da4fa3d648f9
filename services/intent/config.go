package intent

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
)

// ModelTarget is the model the configuration names for the intent stage (models.intent), or
// nil when the stage runs on its rules.
func ModelTarget(cfg *config.Config) *typev1.Target {
	t := cfg.Models.Intent
	if t == nil {
		return nil
	}
	return &typev1.Target{Provider: t.Provider, Model: t.Model}
}

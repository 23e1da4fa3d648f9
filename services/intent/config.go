package intent

import (
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
)

// ModelTarget is the model the configuration names for the intent stage (models.intent), or
// nil when the stage runs on its rules (config.Config.StageModel).
func ModelTarget(cfg *config.Config) *typev1.Target {
	t := cfg.StageModel(cfg.Models.Intent)
	if t == nil {
		return nil
	}
	return &typev1.Target{Provider: t.Provider, Model: t.Model}
}

// DrainTimeout is how long a stopping intent stage with a model of its own (models.intent)
// lets its calls in flight finish (pkg/server.WithDrainTimeout): the model's reading of a
// message, which may take DefaultModelTimeout, or less when the default step timeout is
// shorter (defaults.step_timeout_ms; the orchestrator waits that long for a parse), and
// server.DrainMargin to answer. Cut off sooner, the message is asked of the model (and paid
// for) again by the retry. ok is false without a model: the stage's calls are then quick, and
// the default drain is enough.
func DrainTimeout(cfg *config.Config) (d time.Duration, ok bool) {
	step := time.Duration(cfg.Defaults.StepTimeoutMS) * time.Millisecond
	return server.DrainFor(min(step, DefaultModelTimeout)), ModelTarget(cfg) != nil
}

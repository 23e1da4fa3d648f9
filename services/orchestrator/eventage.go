package orchestrator

import (
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// checkEventsKept refuses a contract whose run may last longer than the event stream keeps
// an event (kept, nats.stream_max_age_ms): the run's first events would expire while it runs,
// paused or not, and a watch from its start find them gone. The configuration keeps its
// defaults and run_limits within it (config.Validate), so only a request's overrides go beyond.
func checkEventsKept(c *typev1.ExecutionContract, kept time.Duration) error {
	if total := c.GetTotalTimeoutMs(); total > kept.Milliseconds() {
		return stageerr.Invalid("overrides.total_timeout_ms must be at most %d "+
			"(nats.stream_max_age_ms: the event stream keeps a run's events no longer), got %d",
			kept.Milliseconds(), total)
	}
	return nil
}

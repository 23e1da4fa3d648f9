package orchestrator

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// checkRunLimits refuses a contract beyond the operator's ceilings (run_limits): an
// INVALID_ARGUMENT naming the first field over its ceiling, or the first target it does not
// allow, as for any out-of-range override. The configuration's defaults and targets keep
// within them (config.Validate), so only a request's overrides can go beyond. Nil ceilings
// (none set) allow anything.
func checkRunLimits(c *typev1.ExecutionContract, ceilings *config.RunLimits) error {
	if ceilings == nil {
		return nil
	}
	for i, t := range c.GetTargets() {
		if !ceilings.Allows(t.GetProvider(), t.GetModel()) {
			return stageerr.Invalid("overrides.targets[%d]: %s", i,
				ceilings.TargetRefusal(t.GetProvider(), t.GetModel()))
		}
	}
	values := map[string]int64{
		"max_turns":               int64(c.GetMaxTurns()),
		"max_tool_calls_per_turn": int64(c.GetMaxToolCallsPerTurn()),
		"max_tool_calls_total":    int64(c.GetMaxToolCallsTotal()),
		"max_retries":             int64(c.GetMaxRetries()),
		"max_tokens_consumed":     c.GetMaxTokensConsumed(),
		"tool_timeout_ms":         c.GetToolTimeoutMs(),
		"step_timeout_ms":         c.GetStepTimeoutMs(),
		"total_timeout_ms":        c.GetTotalTimeoutMs(),
		"tool_response_max_bytes": c.GetToolResponseMaxBytes(),
		"approval_timeout_ms":     c.GetApprovalTimeoutMs(),
		"answer_timeout_ms":       c.GetAnswerTimeoutMs(),
	}
	for _, ceiling := range ceilings.Ceilings() {
		if v := values[ceiling.Field]; !ceiling.Allows(v) {
			return stageerr.Invalid("overrides.%s %s", ceiling.Field, ceiling.Refusal(v))
		}
	}
	return nil
}

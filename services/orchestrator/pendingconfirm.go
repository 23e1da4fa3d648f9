package orchestrator

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// checkPendingConfirmation refuses the pending action of a DecideRequest that is not a
// decision's (REQUEST_CONFIRMATION's pending_action): one naming a run, whose calls wait for
// ResolveApproval and would not run for a "yes" here, and one with a call without an id, with
// an id over MaxCallIDBytes, or with the id of another of its calls, which a "yes" hands back
// to be made as they are. nil (no pending action) passes.
func checkPendingConfirmation(p *typev1.PendingAction) error {
	if p == nil {
		return nil
	}
	if p.GetRunId() != "" {
		return stageerr.Invalid("pending_confirmation.run_id: Decide confirms a decision's pending action, which names no run; " +
			"answer a paused run's calls with ResolveApproval (pending_action.run_id and each call's id)")
	}
	first := make(map[string]int, len(p.GetToolCalls())) // the index of each id's first call
	for i, c := range p.GetToolCalls() {
		id := c.GetId()
		switch j, dup := first[id]; {
		case id == "":
			return stageerr.Invalid("pending_confirmation.tool_calls[%d].id must not be empty", i)
		case len(id) > MaxCallIDBytes:
			return stageerr.Invalid("pending_confirmation.tool_calls[%d].id: at most %d bytes, got %d", i, MaxCallIDBytes, len(id))
		case dup:
			return stageerr.Invalid("pending_confirmation.tool_calls[%d].id %q repeats tool_calls[%d]'s", i, id, j)
		}
		first[id] = i
	}
	return nil
}

package recovery

import (
	"fmt"

	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// fallBackToModel turns a decision that gives up on an LLM failure into a fallback to the
// run's simpler model (state.fallback_target; seed 003: LLM error → fallback to a simpler
// model): whatever ended the attempts — a fatal class, the spent retry budget or last
// attempt, every target refusing, a wait that would outlast the run — the fallback model gets
// one attempt, unless it is the model that just failed.
func fallBackToModel(req *recoveryv1.DecideRequest, resp *recoveryv1.DecideResponse) {
	state := req.GetState()
	fb := state.GetFallbackTarget()
	if resp.GetStrategy() != abort || fb == nil || same(fb)(state.GetTarget()) ||
		req.GetError().GetCode() != typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED {
		return
	}
	resp.Strategy = fallback
	resp.BackoffMs = 0
	resp.ModifiedAction = &recoveryv1.ModifiedAction{Target: &typev1.Target{Provider: fb.GetProvider(), Model: fb.GetModel()}}
	resp.UserMessage = msgLLMFailure
	resp.Reason += fmt.Sprintf("; the run's targets cannot answer, so the simpler model %s/%s gets one attempt", fb.GetProvider(), fb.GetModel())
}

package orchestrator

import (
	"context"
	"fmt"
	"strconv"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// timeoutRetries is how often a timed-out call is retried: once (issue 13.4).
const timeoutRetries = 1

// retryTimeout handles a call that timed out: the recovery stage, told whether the tool is
// idempotent, may retry it with a longer timeout (seed 003: timeout → retry with longer
// timeout), at most once and only when running it again does no harm. The retry is a call of
// its own (id "<id>-retry1"), executed and accounted like the first, with the first's
// approval. It returns the result to observe and a note for the model.
func (r *run) retryTimeout(ctx context.Context, call *typev1.ToolCall, timedOut *actionv1.ExecuteResponse, approval *actionv1.Approval, source string) (*actionv1.ExecuteResponse, string) {
	res, timeout := timedOut, r.contract.GetToolTimeoutMs()
	for retry := 0; ; retry++ {
		se := stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT, "%s timed out after %d ms", call.GetName(), timeout)
		d := r.recover(ctx, "action", se, retry, &recoveryv1.RecoveryState{
			RunId: r.id, ToolName: call.GetName(), TimeoutMs: timeout, Arguments: call.GetArguments(),
			Idempotent: r.tool(call.GetName()).GetIdempotent(), MaxRetries: timeoutRetries, TimeLeftMs: r.timeLeft().Milliseconds(),
		})
		longer := d.GetModifiedAction().GetTimeoutMs()
		if d.GetStrategy() != recoveryv1.Strategy_STRATEGY_RETRY || longer <= 0 || !sleep(ctx, time.Duration(d.GetBackoffMs())*time.Millisecond) {
			break
		}
		first := timeout
		timeout = longer
		res = r.callTool(ctx, &typev1.ToolCall{
			Id: call.GetId() + "-retry" + strconv.Itoa(retry+1), Name: call.GetName(), Arguments: call.GetArguments(), RawArguments: call.GetRawArguments(),
		}, approval, source, timeout)
		if res.GetErrorCode() != typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT {
			return res, fmt.Sprintf("[%s timed out after %d ms; this is the result of a retry with a timeout of %d ms]\n", call.GetName(), first, timeout)
		}
	}
	return res, ""
}

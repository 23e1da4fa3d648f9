package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// tryAlternatives handles a tool that ran and failed: with alternatives configured for it
// (tools.alternatives), the recovery stage may name one to run with the same arguments (seed
// 003: tool error → try alternative tool). Only alternatives the run may use without an
// approval are tried. It returns the result to observe and a note for the model: the
// alternative's result when one succeeded, else the failed call's own, which the run made and
// counts, with the alternatives' failures in the note (an alternative the action stage refused
// never ran: its refusal is no result of the call).
func (r *run) tryAlternatives(ctx context.Context, call *typev1.ToolCall, failed *actionv1.ExecuteResponse, source string) (*actionv1.ExecuteResponse, string) {
	var alts []string
	for _, alt := range r.svc.alternatives[call.GetName()] {
		if slices.ContainsFunc(r.offered, func(t *typev1.Tool) bool { return t.GetName() == alt }) && !r.requiresApproval(alt) {
			alts = append(alts, alt)
		}
	}
	res := failed
	var tried []string
	for retry := range alts {
		se := stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR, "%s failed: %s", call.GetName(), res.GetError())
		d := r.recover(ctx, "action", se, retry, &recoveryv1.RecoveryState{
			RunId: r.id, ToolName: call.GetName(), AlternativeTools: alts, Arguments: call.GetArguments(), TimeoutMs: r.contract.GetToolTimeoutMs(),
		})
		alt := d.GetModifiedAction().GetToolName()
		if d.GetStrategy() != recoveryv1.Strategy_STRATEGY_FALLBACK || alt == "" {
			break
		}
		res = r.callTool(ctx, &typev1.ToolCall{
			Id: call.GetId() + "-alt" + strconv.Itoa(retry+1), Name: alt, Arguments: call.GetArguments(), RawArguments: call.GetRawArguments(),
		}, nil, source, r.contract.GetToolTimeoutMs())
		if res.GetStatus() == typev1.ToolStatus_TOOL_STATUS_SUCCESS {
			return res, fmt.Sprintf("[%s failed (%s); this is the result of the alternative tool %s]\n", call.GetName(), failed.GetError(), alt)
		}
		tried = append(tried, fmt.Sprintf("%s (%s)", alt, res.GetError()))
	}
	if len(tried) == 0 {
		return failed, ""
	}
	return failed, fmt.Sprintf("[%s failed; the alternative tools failed too: %s]\n", call.GetName(), strings.Join(tried, "; "))
}

package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// observe turns a tool result into what the model sees, through the observation stage (the OBSERVE
// state): the result, its summary by the observation model (whose request is accounted to the run,
// as the observation stage's) or its truncation. An observation that says the run should answer now
// (should_continue false) makes the next turn a final turn. A result the stage cannot observe goes
// to the recovery stage: a malformed result (PARSE_ERROR) ends the run (t.badResult), one too large
// to summarise adequately (OBSERVATION_TOO_LARGE) asks the user how to proceed (t.ask); either way
// the model is told the tool failed. A result observed as nothing, outside the observation
// contract, ends the run at the end of the turn (t.badStage), as does any other failure of the
// stage (stageEnding): down after the wait, STAGE_UNAVAILABLE; outside its contract
// (stageerr.Broken), STAGE_CONTRACT_VIOLATION. No answer of the user's mends those, and the tool
// ran: the model is not asked again.
func (r *run) observe(ctx context.Context, call *typev1.ToolCall, res *actionv1.ExecuteResponse, t *turnState) *observationv1.ObserveResponse {
	req := &observationv1.ObserveRequest{
		RunId: r.id, RawResult: res.GetResult(), ToolName: call.GetName(), MaxBytes: r.contract.GetToolResponseMaxBytes(),
		Status: res.GetStatus(), Error: res.GetError(), OutputSchema: r.tool(call.GetName()).GetOutputSchema(),
	}
	obs, err := whenReadyWithin(ctx, "observation", r.modelStageWait(), r.svc.peers.Observation.Observe, req)
	if err != nil {
		se := stageerr.FromError(err)
		switch {
		case errors.Is(se, stageerr.ErrParseError), errors.Is(se, stageerr.ErrObservationTooLarge):
			return r.unobservable(ctx, call, se, t)
		case t.badStage == nil && ctx.Err() == nil:
			// The stage is down (still, after the wait) or broken: the run ends with the
			// turn, as the stage's outage or failure ends it anywhere else. The tool ran: told
			// that it failed, the model would call it again.
			t.badStage = r.stageEnding(ctx, "observation", err)
		}
		if broken := stageerr.Broken(err, "observation"); broken != nil {
			se = broken
		}
		return &observationv1.ObserveResponse{Observation: unobserved + se.Error() + ")"}
	}
	// The requests are the observation stage's, whatever stage a replacement's entries name.
	r.accountStage(stageObservation, obs.GetAccounting())
	if e := obs.GetSummaryError(); e != "" {
		r.svc.log.WarnContext(ctx, "the observation model's summary was not used; the result was truncated", "run_id", r.id,
			"tool", call.GetName(), "why", e)
	}
	if v := checkObservation(req, obs); v != nil && t.badStage == nil {
		t.badStage = v.turnEnding()
	}
	if !obs.GetShouldContinue() {
		r.observedDone = true
	}
	return obs
}

// stageObservation names the observation stage in the accounting entries of the requests it
// makes for a run.
const stageObservation = "observation"

// unobserved begins the observation of a result the observation stage did not observe; the
// reason and ")" follow.
const unobserved = "(tool failed: the result could not be observed: "

// unobservable is the observation of a result the observation stage refused, as the recovery
// stage decides.
func (r *run) unobservable(ctx context.Context, call *typev1.ToolCall, se *stageerr.Error, t *turnState) *observationv1.ObserveResponse {
	obs := &observationv1.ObserveResponse{Observation: unobserved + se.Error() + ")"}
	if ctx.Err() != nil {
		return obs
	}
	d := r.recover(ctx, "observation", se, 0, &recoveryv1.RecoveryState{RunId: r.id, ToolName: call.GetName(), Arguments: call.GetArguments()})
	switch {
	case d.GetStrategy() == recoveryv1.Strategy_STRATEGY_ABORT && se.Code == typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR:
		// Seed 001: a malformed tool result envelope ends the run FAILED_VALIDATION. A
		// replacement recovery stage may abort without a user_message: the run says it.
		t.badResult = fail(typev1.Outcome_OUTCOME_FAILED_VALIDATION, ExitToolResultInvalid, cmp.Or(d.GetUserMessage(), MessageProviderFailure),
			fmt.Sprintf("the result of %s (%s) is malformed: %s", call.GetName(), call.GetId(), se.Error()))
	case d.GetStrategy() == recoveryv1.Strategy_STRATEGY_ASK_USER && t.ask == nil:
		t.ask = &askUser{question: d.GetUserMessage(), reason: fmt.Sprintf("%s (%s): %s", call.GetName(), call.GetId(), se.Error())}
	}
	return obs
}

// tool is the available tool of the name, or nil.
func (r *run) tool(name string) *typev1.Tool {
	if i := slices.IndexFunc(r.available, func(t *typev1.Tool) bool { return t.GetName() == name }); i >= 0 {
		return r.available[i]
	}
	return nil
}

// observedDetail is the OBSERVE transcript entry's detail.
func observedDetail(content string, obs *observationv1.ObserveResponse) string {
	detail := fmt.Sprintf("%d bytes observed, truncated %v", len(content), obs.GetTruncated())
	if obs.GetSummarized() {
		detail += ", summarized by the observation model"
	}
	if e := obs.GetSummaryError(); e != "" {
		detail += "; the summary was not used: " + e
	}
	if !obs.GetShouldContinue() && obs.GetSuccess() {
		detail += "; the observation says the run should answer now"
	}
	return detail
}

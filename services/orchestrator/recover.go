package orchestrator

import (
	"cmp"
	"context"
	"strings"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// recover asks the recovery stage how to handle a failure of the run (recoveryDecision) and
// announces the decision.
func (r *run) recover(ctx context.Context, stage string, se *stageerr.Error, retry int, state *recoveryv1.RecoveryState) *recoveryv1.DecideResponse {
	if state == nil {
		state = &recoveryv1.RecoveryState{RunId: r.id}
	}
	d, detail := r.svc.recoveryDecision(ctx, stage, se, retry, state)
	r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_RecoveryDecided{RecoveryDecided: &eventv1.RecoveryDecided{
		Stage: stage, Error: detail, Strategy: strategyName(d.GetStrategy()), BackoffMs: d.GetBackoffMs(), UserMessage: d.GetUserMessage(),
	}}})
	return d
}

// recoveryDecision asks the recovery stage how to handle a failure; it returns the decision
// and the failure's detail as the stage was told it. When the recovery stage itself cannot
// answer, or answers outside its contract (checkDecision), a conservative local rule applies:
// retryable failures fall back within the retry budget (state.max_retries, else the recovery
// stage's default of 3), others abort.
func (s *Service) recoveryDecision(ctx context.Context, stage string, se *stageerr.Error, retry int, state *recoveryv1.RecoveryState) (*recoveryv1.DecideResponse, *typev1.StageError) {
	detail := stageerr.Detail(se)
	detail.Stage = stage
	d, err := whenReady(ctx, "recovery", s.peers.Recovery.Decide, &recoveryv1.DecideRequest{Error: detail, Stage: stage, RetryCount: int32(retry), State: state})
	reason := "recovery unavailable"
	if err == nil {
		if broken := checkDecision(d, retry, state); broken != nil {
			err, reason = broken, broken.Error()
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "no usable recovery decision; using the local rule", "run_id", state.GetRunId(), "err", err)
		d = &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_ABORT,
			UserMessage: localMessage(se), Reason: reason}
		if se.Retryable() && retry+1 < cmp.Or(int(state.GetMaxRetries()), 3) {
			d.Strategy = recoveryv1.Strategy_STRATEGY_FALLBACK
		}
	}
	return d, detail
}

// localMessage is the user message of the local rule's abort of se: the words for a stage's
// refusal of the request (the run would tell a user it cannot help, or cannot plan, that it has
// trouble and to try again), the question to ask about an unclear intent (which the run asks
// the user, and "I'm having trouble processing your request" is none), else seed 004's
// provider failure.
func localMessage(se *stageerr.Error) string {
	switch se.Code {
	case typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR:
		return MessageClarify
	case typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE:
		return MessageUnsafe
	case typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN:
		return MessageNoViablePlan
	case typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX:
		return MessageTooComplex
	}
	return MessageProviderFailure
}

// stageEnding ends a run whose stage failed with err in a way the loop cannot route around. The
// user gets the recovery decision's message only when the decision is to abort, which is what
// the run does: the message of a retry, a fallback or a question ("trying again in a moment",
// "I'll continue without it", "How would you like me to proceed?") would promise what the
// ended run never does. A failure gRPC gave that no retry mends (stageerr.Broken: the stage
// lacks the method, answers over the message size limit, or its answer does not decode) is
// the stage's failure outside its contract (brokenEnding), not STAGE_UNAVAILABLE: the stage
// answered, and retrying the run cannot help.
func (r *run) stageEnding(ctx context.Context, stage string, err error) *ending {
	if broken := stageerr.Broken(err, stage); broken != nil {
		return r.brokenEnding(broken)
	}
	se := stageerr.FromError(err)
	d := r.recover(ctx, stage, se, 0, nil)
	message := MessageProviderFailure
	if d.GetStrategy() == recoveryv1.Strategy_STRATEGY_ABORT {
		// The recovery stage is swappable: a decision without a user message still leaves the
		// user a report that says something.
		message = cmp.Or(d.GetUserMessage(), MessageProviderFailure)
	}
	outcome := typev1.Outcome_OUTCOME_FAILED_PROVIDER
	if r.turns == 0 {
		outcome = typev1.Outcome_OUTCOME_FAILED_PREFLIGHT
	}
	exit := ExitStageUnavailable
	if se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED && se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE {
		exit = stageerr.CodeName(se.Code)
	}
	e := fail(outcome, exit, message, stage+": "+se.Error())
	e.retryable = se.Retryable() || exit == ExitStageUnavailable
	return e
}

// refusal ends a run before its first turn on a stage's refusal of the request that no
// strategy mends (INTENT_UNSAFE, NO_VIABLE_PLAN, PLAN_TOO_COMPLEX: asked again, the stage
// refuses again), FAILED_PREFLIGHT with exit. The recovery stage decides on it as on every
// failure (seed 003: Intent and Planning fail into Error/Recovery, which always gives the user
// a message), and the user reads its message when it aborts, which is what the run does;
// message, the run's own words, when it decides otherwise (a retry, a fallback or a question
// would promise what the ended run never does) or gives no words.
func (r *run) refusal(
	ctx context.Context, stage string, se *stageerr.Error, exit, message string,
) *ending {
	d := r.recover(ctx, stage, se, 0, nil)
	if d.GetStrategy() == recoveryv1.Strategy_STRATEGY_ABORT {
		message = cmp.Or(d.GetUserMessage(), message)
	}
	return fail(typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, exit, message, se.Error())
}

func strategyName(s recoveryv1.Strategy) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "STRATEGY_"))
}

// nextCycle is the targets rate-limited in the current round-robin cycle (seed 000 §3) once
// target failed with se: one more for a rate limit; none for any other failure, which breaks
// the cycle.
func nextCycle(limited []*recoveryv1.RateLimitedTarget, target *typev1.Target, se *stageerr.Error) []*recoveryv1.RateLimitedTarget {
	if se.Class != typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED {
		return nil
	}
	return append(limited, &recoveryv1.RateLimitedTarget{Target: target, RetryAfterMs: se.RetryAfter.Milliseconds()})
}

package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
)

// Cancellation causes of the run's timers.
var (
	errTotalTimeout = errors.New("total_timeout_ms exceeded")
	errStepTimeout  = errors.New("step_timeout_ms exceeded")
)

// withTimer returns a context that is cancelled with cause after d. Unlike a deadline, the
// timer is not propagated to the stages (gRPC would send it as grpc-timeout), so the
// orchestrator is always the one that observes its own timeouts, and classifies them exactly.
func withTimer(parent context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := time.AfterFunc(d, func() { cancel(cause) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// commit closes a turn: it evaluates the transition predicates in the Monolith order and
// returns the ending, or nil to continue with another turn.
func (r *run) commit(runCtx, stepCtx context.Context, pending *ending, t *turnState) *ending {
	var end *ending
	st := typev1.RunState_RUN_STATE_COMMIT
	r.step(context.WithoutCancel(runCtx), st, r.stepID(st), func(context.Context) (proto.Message, proto.Message, string) {
		end = r.predicates(runCtx, stepCtx, pending, t)
		detail := fmt.Sprintf("turn %d: %d tool calls so far, %d tokens", r.turns, r.toolCalls, r.usage.GetTotal())
		if end != nil {
			detail += "; terminate " + end.exit
		}
		return nil, r.usage, detail
	})
	if end == nil {
		return r.checkpoint(runCtx, checkpointv1.Phase_PHASE_READY, nil, nil)
	}
	return end
}

func (r *run) predicates(runCtx, stepCtx context.Context, pending *ending, t *turnState) *ending {
	c := r.contract
	// 1. Interrupt and timeouts.
	if e := r.interruption(runCtx); e != nil {
		return e
	}
	if errors.Is(context.Cause(stepCtx), errStepTimeout) {
		return timedOut(fmt.Sprintf("step_timeout_ms (%d ms) exceeded in turn %d", c.GetStepTimeoutMs(), r.turns))
	}
	// 2. Budgets.
	if c.GetMaxTokensConsumed() > 0 && r.usage.GetTotal() > c.GetMaxTokensConsumed() {
		return fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxTokens, MessageTooComplex,
			fmt.Sprintf("%d tokens consumed, budget %d", r.usage.GetTotal(), c.GetMaxTokensConsumed()))
	}
	if t.budgetExhausted {
		return fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxToolCalls, MessageTooComplex,
			fmt.Sprintf("the model asked for more than %d tool calls", c.GetMaxToolCallsTotal()))
	}
	// A stage failure of this turn (provider exhausted, stage down).
	if pending != nil {
		return pending
	}
	// 3. Contract policy.
	if t.forbiddenCall {
		return fail(typev1.Outcome_OUTCOME_FAILED_CONTRACT_VIOLATION, ExitToolPolicyViolation, "",
			"the model called a tool although tools are forbidden for this run")
	}
	if t.cycle != "" {
		return fail(typev1.Outcome_OUTCOME_FAILED_CONTRACT_VIOLATION, ExitCycleForbidden, "", "forbidden tool sequence "+t.cycle)
	}
	if t.malformed > 0 {
		r.formatFails++
		if r.formatFails > c.GetMaxFormatRetries() {
			return fail(typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, ExitInvalidToolCall, MessageProviderFailure,
				fmt.Sprintf("malformed tool calls in %d turns; max_format_retries is %d", r.formatFails, c.GetMaxFormatRetries()))
		}
	}
	final, reportErr := r.finalAnswer(t)
	if final != nil && c.GetToolPolicy() == typev1.ToolPolicy_TOOL_POLICY_REQUIRED && r.toolCalls == 0 {
		return fail(typev1.Outcome_OUTCOME_FAILED_PROTOCOL_NO_TOOLS, ExitToolRequired, "",
			"the run requires a tool, but the model answered without executing one")
	}
	if reportErr != nil {
		if r.collapsed {
			return fail(typev1.Outcome_OUTCOME_FAILED_VALIDATION, ExitFinalReportInvalid, MessageProviderFailure, reportErr.Error())
		}
		r.collapsed = true // seed 000: the remaining turns collapse into one final turn
		return nil
	}
	// 4. Context threshold: a forced final turn must end the run.
	if t.finalTurn && final == nil && t.answer != nil {
		if r.collapsed {
			return fail(typev1.Outcome_OUTCOME_FAILED_VALIDATION, ExitFinalReportInvalid, MessageProviderFailure,
				"the final turn after a refused final report produced no answer")
		}
		return fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxContext, messageContextFull,
			"the forced final turn produced no answer")
	}
	// 5. Normal success.
	if final != nil {
		outcome := typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY
		if r.toolCalls > 0 {
			outcome = typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS
		}
		return &ending{outcome: outcome, exit: ExitCompleted, answer: t.answer, report: final, truncated: t.truncated}
	}
	// 6. Continue.
	return nil
}

// finalAnswer is the turn's final report: an accepted final_report call or XML final slot,
// or a text answer with no tool calls and no transport tags (for json output it must be a
// JSON object matching the schema).
func (r *run) finalAnswer(t *turnState) (*report, error) {
	if t.report != nil || t.reportErr != nil {
		return t.report, t.reportErr
	}
	if t.answer == nil || len(t.answer.GetToolCalls()) > 0 || t.answer.GetContent() == "" || usedTags(t.xml) || t.transportTags {
		return nil, nil
	}
	return reportFromText(r.contract, r.outputSchema, t.answer.GetContent())
}

// interruption is the ending of a run whose context ended (a cancellation or the total
// timeout), or nil while it goes on.
func (r *run) interruption(runCtx context.Context) *ending {
	if runCtx.Err() == nil {
		return nil
	}
	if cause := context.Cause(runCtx); !errors.Is(cause, errTotalTimeout) {
		return fail(typev1.Outcome_OUTCOME_INTERRUPTED, ExitCancelled, "The run was cancelled.", cause.Error())
	}
	return timedOut(fmt.Sprintf("total_timeout_ms (%d ms) exceeded", r.contract.GetTotalTimeoutMs()))
}

func timedOut(reason string) *ending {
	e := fail(typev1.Outcome_OUTCOME_FAILED_TIMEOUT, ExitTimeout, "The request took too long. Please try again.", reason)
	e.retryable = true
	return e
}

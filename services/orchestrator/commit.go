package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
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
	finalReason := r.finalReason() // why this turn was final (when t.finalTurn), before the predicates change it
	// 1. Interrupt and timeouts.
	if e := r.interruption(runCtx); e != nil {
		return e
	}
	if errors.Is(context.Cause(stepCtx), errStepTimeout) {
		return timedOut(fmt.Sprintf("step_timeout_ms (%d ms) exceeded in turn %d", c.GetStepTimeoutMs(), r.turns))
	}
	// 2. Budgets. A call dropped over the tool call budget does not end the run at once: one
	// final turn follows, so the model can answer with what it has (seed 002 §7).
	if r.overTokenBudget() {
		return r.tokenBudgetSpent()
	}
	if t.budgetExhausted {
		r.toolBudgetSpent = true
	}
	// A stage failure of this turn (provider exhausted, stage down).
	if pending != nil {
		return pending
	}
	// 3. Contract policy.
	if t.forbiddenCall {
		return fail(typev1.Outcome_OUTCOME_FAILED_CONTRACT_VIOLATION, ExitToolPolicyViolation, MessageToolPolicyViolation,
			"the model called a tool although tools are forbidden for this run")
	}
	if t.cycle != "" {
		return fail(typev1.Outcome_OUTCOME_FAILED_CONTRACT_VIOLATION, ExitCycleForbidden, MessageCycleForbidden, "forbidden tool sequence "+t.cycle)
	}
	if t.malformed > 0 {
		r.formatFails++
		if r.formatFails > c.GetMaxFormatRetries() {
			return fail(typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, ExitInvalidToolCall, MessageProviderFailure,
				fmt.Sprintf("malformed tool calls in %d turns; max_format_retries is %d", r.formatFails, c.GetMaxFormatRetries()))
		}
	}
	// A final answer, accepted or refused, is a terminal response: without an executed tool it
	// ends a required run here, before a refused one collapses the turns into a final turn
	// that offers no tool (seed 001: the policy check precedes every success path).
	final, reportErr := r.finalAnswer(t)
	if (final != nil || reportErr != nil) && c.GetToolPolicy() == typev1.ToolPolicy_TOOL_POLICY_REQUIRED && r.toolCalls == 0 {
		return fail(typev1.Outcome_OUTCOME_FAILED_PROTOCOL_NO_TOOLS, ExitToolRequired, MessageToolRequired,
			"the run requires a tool, but the model answered without executing one")
	}
	// The one turn after the budget ran out, whatever else made it final as well (a refused
	// report collapsing the turns, the context guard): its answer still ends the run
	// MAX_TOOL_CALLS_REACHED. A final turn drops no call, so the budget ran out before it.
	budgetTurn := t.finalTurn && r.toolBudgetSpent
	if reportErr != nil {
		switch {
		case r.collapsed:
			return fail(typev1.Outcome_OUTCOME_FAILED_VALIDATION, ExitFinalReportInvalid, MessageProviderFailure, reportErr.Error())
		case budgetTurn:
			return r.toolBudgetEnding(nil, nil, "the final report of the final turn that followed was refused: "+reportErr.Error())
		case r.turns >= c.GetMaxTurns():
			// No turn remains to collapse into: the report's refusal, not the turn limit, ends
			// the run.
			return fail(typev1.Outcome_OUTCOME_FAILED_VALIDATION, ExitFinalReportInvalid, MessageProviderFailure,
				"the final report of the last turn under max_turns was refused: "+reportErr.Error())
		}
		r.collapsed = true // seed 000: the remaining turns collapse into one final turn
		return nil
	}
	// 4. A final turn without an answer ends the run, as its reason says.
	if t.finalTurn && final == nil && t.answer != nil {
		switch {
		case r.collapsed:
			return fail(typev1.Outcome_OUTCOME_FAILED_VALIDATION, ExitFinalReportInvalid, MessageProviderFailure,
				"the final turn after a refused final report produced no answer")
		case finalReason == finalContext:
			return fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxContext, messageContextFull,
				"the forced final turn produced no answer")
		case budgetTurn:
			return r.toolBudgetEnding(nil, nil, "the final turn that followed produced no answer")
		}
		// The last turn under max_turns: the loop ends with seed 000's synthetic failure report.
		return nil
	}
	// 5. Normal success; the answer of the turn after the tool call budget ran out, or of the
	// turn that dropped a call over it, still ends the run MAX_TOOL_CALLS_REACHED.
	if final != nil {
		switch {
		case budgetTurn:
			return r.toolBudgetEnding(t.answer, final, "the model answered in the final turn that followed")
		case t.budgetExhausted:
			return r.toolBudgetEnding(t.answer, final, "the model answered in the turn that dropped a call over it")
		}
		outcome := typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY
		if r.toolCalls > 0 {
			outcome = typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS
		}
		return &ending{outcome: outcome, exit: ExitCompleted, answer: t.answer, report: final, truncated: t.truncated}
	}
	// 6. Continue.
	return nil
}

// tokenBudgetSpent ends a run that consumed more than max_tokens_consumed.
func (r *run) tokenBudgetSpent() *ending {
	why := fmt.Sprintf("%d tokens consumed, budget %d",
		r.usage.GetTotal(), r.contract.GetMaxTokensConsumed())
	return fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxTokens,
		MessageTooComplex, why)
}

// overTokenBudget reports whether the run consumed more than max_tokens_consumed.
func (r *run) overTokenBudget() bool {
	c := r.contract
	return c.GetMaxTokensConsumed() > 0 && r.usage.GetTotal() > c.GetMaxTokensConsumed()
}

// endsWhateverTheAnswer reports whether COMMIT ends the run after turn t whatever its user
// would answer a question: the predicates that do not depend on the answer (the token
// budget, the contract's tool policy, cycle_forbid and max_format_retries) end it. Such a
// turn asks nothing: the run would wait for an answer it then throws away. Its format fails
// are counted as predicates counts them, with this turn's.
func (r *run) endsWhateverTheAnswer(t *turnState) bool {
	return r.overTokenBudget() || t.forbiddenCall || t.cycle != "" ||
		t.malformed > 0 && r.formatFails+1 > r.contract.GetMaxFormatRetries()
}

// toolBudgetEnding ends a run after the final turn that followed its tool call budget running
// out (seed 002 §7): FAILED_BUDGET_EXHAUSTED / MAX_TOOL_CALLS_REACHED (DESIGN §6), retryable.
// The dropped calls' tool messages were for the model; the user gets the model's answer of
// that final turn when it gave one (final report status success, since the model gave it,
// although the run failed), else the canned message. how says what the final turn did.
func (r *run) toolBudgetEnding(answer *typev1.Message, final *report, how string) *ending {
	e := fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxToolCalls, MessageTooComplex,
		fmt.Sprintf("the run's budget of %d tool calls ran out; %s", r.contract.GetMaxToolCallsTotal(), how))
	e.answer, e.report, e.retryable = answer, final, true
	return e
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
	return r.totalTimeout()
}

// totalTimeout is the ending of a run past its total_timeout_ms.
func (r *run) totalTimeout() *ending {
	return timedOut(fmt.Sprintf("total_timeout_ms (%d ms) exceeded", r.contract.GetTotalTimeoutMs()))
}

// deadline is when the run's total_timeout_ms, counted from its first start, runs out.
func (r *run) deadline() time.Time {
	return r.startedAt.Add(time.Duration(r.contract.GetTotalTimeoutMs()) * time.Millisecond)
}

// pauseExpiry is the expires_at of a pause that begins at now and waits timeout: the run's
// deadline when that comes first, since total_timeout_ms counts through a pause and a pause
// promises no deadline the run does not keep.
func (r *run) pauseExpiry(now time.Time, timeout time.Duration) *timestamppb.Timestamp {
	exp := now.Add(timeout)
	if d := r.deadline(); d.Before(exp) {
		exp = d
	}
	return timestamppb.New(exp)
}

// endsAtDeadline reports whether a pause expiring at exp ends at the run's deadline (see
// pauseExpiry): unanswered, it ends the run TIMEOUT, as the run's deadline does anywhere else.
func (r *run) endsAtDeadline(exp *timestamppb.Timestamp) bool {
	return !exp.AsTime().Before(r.deadline())
}

func timedOut(reason string) *ending {
	e := fail(typev1.Outcome_OUTCOME_FAILED_TIMEOUT, ExitTimeout, "The request took too long. Please try again.", reason)
	e.retryable = true
	return e
}

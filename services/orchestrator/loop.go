package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"github.com/agentmesh/agentmesh/pkg/xmltransport"
	"google.golang.org/protobuf/proto"
)

// execute drives the run to TERMINATE (from PRECHECK, or from where its checkpoint left it).
// TERMINATE runs on a context detached from the run's cancellation, so a cancelled or
// timed-out run still saves its result and publishes run_finished. A run handed off to
// another replica, or taken over by one, stops without terminating.
func (r *run) execute(ctx context.Context) {
	end := r.drive(ctx)
	if stop := stopCause(ctx); stop != nil {
		end = stop
	}
	if end.resume != nil {
		r.resume = end.resume // runHere continues the run from the pause
		return
	}
	if end.stop {
		r.moveAway(ctx, end)
		return
	}
	// TERMINATE outlives the run's cancellation, but not a drain whose time is up: then the
	// run is handed off, and the replica that resumes it terminates it.
	tctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	defer context.AfterFunc(r.svc.abandon, func() { cancel(errHandOff) })()
	r.terminate(tctx, *end)
}

// drive runs the states up to the ending.
func (r *run) drive(ctx context.Context) *ending {
	if e := r.begin(ctx); e != nil {
		return e
	}
	// The last turn is a final turn (finalMaxTurns): a run that reaches it can still answer.
	for r.turns < r.contract.GetMaxTurns() {
		if e := r.revisePlan(ctx); e != nil {
			return cmp.Or(r.interruption(ctx), e).then(r.nextTurn)
		}
		if e := r.nextTurn(ctx); e != nil {
			return e
		}
	}
	e := fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxTurns, MessageTooComplex, "max_turns_exhausted")
	e.retryable = true
	return e
}

// begin brings the run to its turns: from the start (PRECHECK, INTENT, the plan), from where
// its checkpoint left it, or from the pause where it yielded its goroutine.
func (r *run) begin(ctx context.Context) *ending {
	if resume := r.resume; resume != nil {
		r.resume = nil
		return resume(ctx)
	}
	switch r.resumeFrom.GetPhase() {
	case checkpointv1.Phase_PHASE_UNSPECIFIED, checkpointv1.Phase_PHASE_STARTED:
		// A stage call cut short by a cancellation fails: the cancellation is the ending.
		if e := r.precheck(ctx); e != nil {
			return cmp.Or(r.interruption(ctx), e)
		}
		if e := r.parseIntent(ctx, "INTENT"); e != nil {
			return cmp.Or(r.interruption(ctx), e)
		}
		return r.prepare(ctx)
	case checkpointv1.Phase_PHASE_AWAITING_INPUT:
		if r.turns > 0 {
			return r.resumeTurn(ctx)
		}
		// Paused before the first turn: the question about the intent (clarifyIntent).
		r.asking = restoreQuestion(r.resumeFrom)
		r.unclear = &askUser{question: r.resumeFrom.GetQuestion().GetQuestion(), reason: r.resumeFrom.GetQuestion().GetReason()}
		return r.prepare(ctx)
	case checkpointv1.Phase_PHASE_EXECUTING, checkpointv1.Phase_PHASE_AWAITING_APPROVAL:
		return r.resumeTurn(ctx)
	}
	return nil
}

// nextTurn counts and runs the next turn, unless the tokens the stages' models spent since
// the last COMMIT (the intent and planning models before the first turn, a plan's revision
// between turns) took the run over max_tokens_consumed: no turn is asked for over a spent
// budget.
func (r *run) nextTurn(ctx context.Context) *ending {
	if r.overTokenBudget() {
		return r.tokenBudgetSpent()
	}
	r.turns++
	return r.turn(ctx)
}

// prepare makes the run ready for its first turn once its intent is parsed: it asks the user
// first when the intent was unclear (clarifyIntent), plans, and checkpoints the run READY.
func (r *run) prepare(ctx context.Context) *ending {
	if r.unclear != nil {
		if e := r.clarifyIntent(ctx); e != nil {
			return cmp.Or(r.interruption(ctx), e).then(r.planReady)
		}
	}
	return r.planReady(ctx)
}

// planReady plans the run and checkpoints it READY.
func (r *run) planReady(ctx context.Context) *ending {
	if e := r.makePlan(ctx); e != nil {
		return cmp.Or(r.interruption(ctx), e).then(r.ready)
	}
	return r.ready(ctx)
}

// ready checkpoints the run READY for its first turn.
func (r *run) ready(ctx context.Context) *ending {
	return r.checkpoint(ctx, checkpointv1.Phase_PHASE_READY, nil, nil)
}

// precheck validates the run before any stage call that costs: empty input ends the run
// without an LLM call (seed 002), and the contract must be feasible (Monolith Phase 2b).
func (r *run) precheck(ctx context.Context) *ending {
	var end *ending
	r.step(ctx, typev1.RunState_RUN_STATE_PRECHECK, "PRECHECK", func(ctx context.Context) (proto.Message, proto.Message, string) {
		if strings.TrimSpace(r.req.GetMessage()) == "" {
			end = fail(typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, ExitEmptyInput, "", "the message is empty")
			end.retryable = true
			return r.req, r.contract, "empty input: no LLM call is made"
		}
		tools, err := r.svc.listTools(ctx)
		if broken := stageerr.Broken(err, "action"); broken != nil {
			end = r.brokenEnding(broken)
			return r.req, r.contract, end.reason
		}
		if err != nil {
			end = fail(typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, ExitStageUnavailable, MessageProviderFailure,
				"the action service did not list its tools: "+stageerr.FromError(err).Error())
			end.retryable = true
			return r.req, r.contract, end.reason
		}
		if broken := checkTools(tools); broken != nil {
			end = broken.ending()
			return r.req, r.contract, end.reason
		}
		r.available = tools
		why := cmp.Or(preflight(r.contract, r.available), r.systemOverflows())
		if why == "" {
			why = r.unknownProvider(ctx)
		}
		if why != "" {
			end = fail(typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, ExitInvalidContract, MessageProviderFailure, why)
			return r.req, r.contract, why
		}
		return r.req, r.contract, "contract feasible"
	})
	return end
}

// parseIntent resolves the goal and the tool policy, then seals the contract: it is immutable
// from here on (before the first inference, Monolith invariant B). An answer outside the intent
// contract ends the run STAGE_CONTRACT_VIOLATION.
func (r *run) parseIntent(ctx context.Context, stepID string) *ending {
	var end *ending
	r.step(ctx, typev1.RunState_RUN_STATE_INTENT, stepID, func(ctx context.Context) (proto.Message, proto.Message, string) {
		req := &intentv1.ParseRequest{
			Message:        r.intentMessage(),
			ConversationId: r.req.GetConversationId(),
			Surface:        r.req.GetSurface(),
			UserId:         r.userID,
			AvailableTools: toolname.Of(offeredTools(r.contract, r.available)), // the tools the run may use
			RunId:          r.id,
		}
		resp, err := whenReadyWithin(ctx, "intent", r.modelStageWait(), r.svc.peers.Intent.Parse, req)
		if err != nil {
			r.accountStage(stageIntent, stageerr.FromError(err).Accounting) // the intent model's request, when it refused
			end = r.intentFailure(ctx, err)
			if end == nil {
				return req, nil, "unclear; asking the user: " + stageerr.FromError(err).Error()
			}
			return req, nil, end.reason
		}
		if broken := checkIntent(resp); broken != nil {
			r.accountStage(stageIntent, resp.GetAccounting())
			end = broken.ending()
			return req, resp, end.reason
		}
		r.takeIntent(resp)
		policy := r.contract.GetToolPolicy()
		if policy == typev1.ToolPolicy_TOOL_POLICY_UNSPECIFIED {
			policy = resp.GetToolPolicy()
		}
		if policy == typev1.ToolPolicy_TOOL_POLICY_UNSPECIFIED {
			policy = typev1.ToolPolicy_TOOL_POLICY_OPTIONAL
		}
		draft := proto.CloneOf(r.contract)
		draft.ToolPolicy = policy
		r.contract = seal(draft, contractHash(r.contract))
		r.offered = offeredTools(r.contract, r.available)
		if r.xml == nil {
			r.reportTool = finalReportTool(r.contract, r.req.GetOutputSchema())
		}
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_IntentParsed{IntentParsed: &eventv1.IntentParsed{
			Goal: resp.GetGoal(), Constraints: resp.GetConstraints(),
			TaskType: taskTypeName(resp.GetTaskType()), ToolPolicy: policy,
			Source: resp.GetSource(), FallbackReason: resp.GetFallbackReason(),
		}}})
		// A policy the request set was checked in PRECHECK; one the intent resolved is
		// checked here, still before any LLM call.
		if why := cmp.Or(requiredNeedsTurns(r.contract, " (from the intent)"), requiredWithoutTools(r.contract, r.available, " (from the intent)")); why != "" {
			end = fail(typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, ExitInvalidContract, MessageProviderFailure, why)
			return req, resp, why
		}
		if resp.GetNeedsClarification() {
			q := resp.GetClarificationQuestion()
			end = r.askClarification(q, "")
			return req, resp, "needs clarification: " + q
		}
		detail := "tool policy " + policy.String() + ": " + resp.GetPolicyReason()
		if fb := resp.GetFallbackReason(); fb != "" {
			detail += "; parsed by the rules: " + fb
		}
		return req, resp, detail
	})
	return end
}

func (r *run) intentFailure(ctx context.Context, err error) *ending {
	se := stageerr.FromError(err)
	switch {
	case errors.Is(se, stageerr.ErrIntentUnsafe):
		return r.refusal(ctx, "intent", se, ExitIntentUnsafe, MessageUnsafe)
	case errors.Is(se, stageerr.ErrIntentUnclear):
		d := r.recover(ctx, "intent", se, 0, nil)
		if d.GetStrategy() == recoveryv1.Strategy_STRATEGY_ASK_USER && r.clarification == "" && ctx.Err() == nil {
			r.unclear = &askUser{question: cmp.Or(d.GetUserMessage(), MessageClarify), reason: "intent: " + se.Error()}
			return nil // prepare asks
		}
		return r.askClarification(d.GetUserMessage(), se.Error())
	}
	return r.stageEnding(ctx, "intent", err)
}

// askClarification ends the run asking the user question: a chat-only success, except under
// tool_policy required, where a run that executed no tool is never a success (Monolith
// invariant C), so it ends TOOL_REQUIRED with the question as its report.
func (r *run) askClarification(question, reason string) *ending {
	question = cmp.Or(question, MessageClarify)
	r.decision = &typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION, ClarificationQuestion: question}
	answer := &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: question}
	r.conversation = append(r.conversation, answer)
	if r.contract.GetToolPolicy() == typev1.ToolPolicy_TOOL_POLICY_REQUIRED {
		return fail(typev1.Outcome_OUTCOME_FAILED_PROTOCOL_NO_TOOLS, ExitToolRequired, question,
			"the run requires a tool, but the request needs clarification first")
	}
	return &ending{outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: ExitCompleted, answer: answer, reason: reason}
}

// makePlan asks the planning stage for steps (with the intent's task type and constraints,
// so NO_VIABLE_PLAN and PLAN_TOO_COMPLEX end the run before any LLM turn, and so does a plan
// outside the planning contract, STAGE_CONTRACT_VIOLATION). With tools
// forbidden there is nothing to plan. The plan is tracked from here on (planTracker), and a
// plan that requires human approval waits for it when tools.approve_plans asks (approvePlan).
func (r *run) makePlan(ctx context.Context) *ending {
	var (
		end  *ending
		resp *planningv1.PlanResponse
	)
	r.step(ctx, typev1.RunState_RUN_STATE_PLAN, "PLAN", func(ctx context.Context) (proto.Message, proto.Message, string) {
		if r.contract.GetToolPolicy() == typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN {
			return nil, nil, "skipped: tools are forbidden"
		}
		req := r.planRequest(nil)
		var err error
		resp, err = r.askPlanning(ctx, req)
		var broken *contractViolation
		if errors.As(err, &broken) {
			end = broken.ending()
			return req, nil, end.reason
		}
		if err != nil {
			se := stageerr.FromError(err)
			switch {
			case errors.Is(se, stageerr.ErrNoViablePlan):
				end = r.refusal(ctx, stagePlanning, se, ExitNoViablePlan, MessageNoViablePlan)
			case errors.Is(se, stageerr.ErrPlanTooComplex):
				end = r.refusal(ctx, stagePlanning, se, ExitPlanTooComplex, MessageTooComplex)
			default:
				end = r.stageEnding(ctx, "planning", err)
			}
			return req, nil, end.reason
		}
		r.tracker = newPlanTracker(resp.GetSteps())
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_PlanCreated{PlanCreated: &eventv1.PlanCreated{
			Steps: resp.GetSteps(), RequiresHumanApproval: resp.GetRequiresHumanApproval(),
			Source: resp.GetSource(), FallbackReason: resp.GetFallbackReason(), EstimatedSteps: resp.GetEstimatedSteps(),
		}}})
		return req, resp, planDetail(fmt.Sprintf("%d steps", len(resp.GetSteps())), resp, r.contract)
	})
	if end != nil || resp == nil {
		return end
	}
	return r.approvePlan(ctx, resp.GetRequiresHumanApproval())
}

// turn runs one LLM request/response cycle and its tool phase, always ending in COMMIT. Once
// its tool calls are validated, the turn is checkpointed, so a replica that resumes the run
// executes exactly these calls (and the action stage returns the results of those that ran).
func (r *run) turn(ctx context.Context) *ending {
	stepCtx, cancel := r.stepTimer(ctx)
	defer func() { cancel() }()
	final := r.finalReason()
	r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_TurnStarted{TurnStarted: &eventv1.TurnStarted{Turn: r.turns, ForcedFinal: final != "", Reason: final}}})
	var (
		t    turnState
		plan []plannedCall
	)
	step := r.tracker.current() // the step the turn works on, as assemble shows it
	messages, tools, end := r.assemble(stepCtx)
	t.finalTurn = r.finalReason() != "" // the context guard may have forced it in assemble
	if end == nil {
		end = r.infer(stepCtx, messages, tools, &t)
	}
	if end == nil && t.answer != nil {
		r.tracker.answered(step, r.turns)
		plan = r.validateCalls(stepCtx, &t)
	}
	if end == nil && stepCtx.Err() == nil && len(plan) > 0 {
		if e := r.checkpoint(ctx, checkpointv1.Phase_PHASE_EXECUTING, &t, plan); e != nil {
			return e
		}
	}
	return r.finishTurn(ctx, stepCtx, &cancel, end, &t, plan)
}

// stepTimer starts the step_timeout_ms timer of a turn.
func (r *run) stepTimer(ctx context.Context) (context.Context, context.CancelFunc) {
	return withTimer(ctx, time.Duration(r.contract.GetStepTimeoutMs())*time.Millisecond, errStepTimeout)
}

// finishTurn waits for approvals, executes the validated calls, waits for the user's answer
// when recovery asked for one (unless COMMIT ends the run whatever the answer), and commits
// the turn. A pause for a person stops the step
// timer (cancel is replaced): a person's time is not the step's.
func (r *run) finishTurn(ctx, stepCtx context.Context, cancel *context.CancelFunc, end *ending, t *turnState, plan []plannedCall) *ending {
	if end == nil && stepCtx.Err() == nil && slices.ContainsFunc(plan, awaitsApproval) {
		(*cancel)()
		end = r.awaitApproval(ctx, t, plan)
		if end != nil && end.stop {
			return end.instead(func(ctx context.Context) *ending { return r.continueTurn(ctx, t, plan) })
		}
		stepCtx, *cancel = r.stepTimer(ctx)
		if end == nil {
			if e := r.checkpoint(ctx, checkpointv1.Phase_PHASE_EXECUTING, t, plan); e != nil {
				return e
			}
		}
	}
	r.executeCalls(stepCtx, plan, t)
	end = cmp.Or(end, t.badResult, t.badStage)
	if end == nil && t.ask != nil && stepCtx.Err() == nil && !r.endsWhateverTheAnswer(t) {
		(*cancel)()
		return r.answerThenCommit(ctx, t)
	}
	return r.commit(ctx, stepCtx, end, t)
}

// continueTurn finishes a turn from its validated calls (finishTurn), with a new step timer.
func (r *run) continueTurn(ctx context.Context, t *turnState, plan []plannedCall) *ending {
	stepCtx, cancel := r.stepTimer(ctx)
	defer func() { cancel() }()
	return r.finishTurn(ctx, stepCtx, &cancel, nil, t, plan)
}

// answerThenCommit waits for the user's answer to the turn's question, then commits the turn
// under a new step timer.
func (r *run) answerThenCommit(ctx context.Context, t *turnState) *ending {
	end := r.awaitAnswer(ctx, t)
	if end != nil && end.stop {
		return end.instead(func(ctx context.Context) *ending { return r.answerThenCommit(ctx, t) })
	}
	stepCtx, cancel := r.stepTimer(ctx)
	defer cancel()
	return r.commit(ctx, stepCtx, end, t)
}

// resumeTurn finishes the turn a checkpoint was taken in: a pause goes on waiting for its
// decisions or its answer (until the stored deadline), validated calls are executed, and the
// turn commits. A pause for the plan's approval, between turns, goes on waiting, and the next
// turn follows.
func (r *run) resumeTurn(ctx context.Context) *ending {
	cp := r.resumeFrom
	switch cp.GetPhase() {
	case checkpointv1.Phase_PHASE_AWAITING_APPROVAL:
		r.approval = restoreApproval(cp)
		if isPlanPause(cp.GetPending()) { // between turns: the pause is all there is to finish
			return r.approvePlan(ctx, true)
		}
	case checkpointv1.Phase_PHASE_AWAITING_INPUT:
		r.asking = restoreQuestion(cp)
	}
	t, plan := restoreTurn(cp.GetTurn())
	if cp.GetPhase() == checkpointv1.Phase_PHASE_AWAITING_INPUT {
		t.ask = &askUser{question: cp.GetQuestion().GetQuestion(), reason: cp.GetQuestion().GetReason()}
	}
	return r.continueTurn(ctx, t, plan)
}

// awaitsApproval reports whether a validated call waits for a person's decision.
func awaitsApproval(p plannedCall) bool {
	return p.refusal == "" && p.needsApproval && p.approval == nil
}

// turnState is what COMMIT needs to know about the turn.
type turnState struct {
	answer          *typev1.Message
	attempted       int  // tool calls the model asked for
	forbiddenCall   bool // a tool was asked for under a forbidden policy
	cycle           string
	budgetExhausted bool // the run's tool call budget ran out
	malformed       int  // calls the protocol adapter rejected (arguments not valid JSON, no name): the retry ladder counts them
	finalTurn       bool // the request offered only final_report (or the XML final slot)
	cutOff          bool // the answer was cut off at the output token limit (stop reason length)
	truncated       bool // its final answer was cut off in every attempt and is taken as it is
	transportTags   bool // the answer used XML transport tags (a turn restored from a checkpoint)
	report          *report
	reportErr       error                // why a final report was refused
	xml             *xmltransport.Result // the answer's transport tags (XML modes)
	badResult       *ending              // a tool result was malformed: the run ends FAILED_VALIDATION
	badStage        *ending              // a stage answered outside its contract: the run ends
	ask             *askUser             // recovery asks the user how to proceed: the turn pauses for the answer
}

// turnTools are the tools of the coming request: the run's tools (and final_report for json
// output), or only final_report in a final turn (finalReason; seed 000 §2). In the XML modes
// the final report is the XML final slot, so a final turn has no tools. In xml mode the tools
// are listed in XML-NEXT instead of being sent to the provider (providerTools).
func (r *run) turnTools() []*typev1.Tool {
	if r.finalReason() != "" {
		if r.xml != nil {
			return nil
		}
		return []*typev1.Tool{r.reportTool}
	}
	tools := slices.Clone(r.offered)
	if r.reportTool != nil && r.contract.GetOutputFormat() == typev1.OutputFormat_OUTPUT_FORMAT_JSON {
		tools = append(tools, r.reportTool)
	}
	return tools
}

// offeredTools are the tools a run may use under its contract.
func offeredTools(c *typev1.ExecutionContract, available []*typev1.Tool) []*typev1.Tool {
	if c.GetToolPolicy() == typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN {
		return nil
	}
	if len(c.GetAllowedTools()) == 0 {
		return available
	}
	var out []*typev1.Tool
	for _, t := range available {
		if slices.Contains(c.GetAllowedTools(), t.GetName()) {
			out = append(out, t)
		}
	}
	return out
}

func taskTypeName(t intentv1.TaskType) string {
	return strings.ToLower(strings.TrimPrefix(t.String(), "TASK_TYPE_"))
}

package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/jsonrepair"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"github.com/agentmesh/agentmesh/pkg/xmltransport"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// askedCall is a tool call the model asked for, as a native tool call or in an XML slot.
type askedCall struct {
	call *typev1.ToolCall
	xml  bool
}

// plannedCall is a tool call after VALIDATE_CALLS: it runs, or is refused with a reason.
type plannedCall struct {
	call          *typev1.ToolCall
	xml           bool // written in an XML slot: answered in the XML-PAST message
	refusal       string
	needsApproval bool
	approval      *actionv1.Approval // the recorded approval it runs with
	note          string             // prefixed to its observation (modified arguments)
}

// validateCalls checks the model's tool calls, native and XML, against policy and budgets
// (none runs once the run's tokens are over max_tokens_consumed), and takes the final report
// of the XML final slot. A call that will not run gets a refusal,
// answered with a "(tool failed: …)" tool message (or XML-PAST entry) in call order, so the
// model sees why and the conversation stays well-formed.
func (r *run) validateCalls(ctx context.Context, t *turnState) []plannedCall {
	var (
		plan  []plannedCall
		valid []*typev1.ToolCall
	)
	asked, notes := r.askedCalls(t)
	calls := make([]*typev1.ToolCall, len(asked))
	for i, a := range asked {
		calls[i] = a.call
	}
	st := typev1.RunState_RUN_STATE_VALIDATE_CALLS
	r.step(ctx, st, r.stepID(st), func(context.Context) (proto.Message, proto.Message, string) {
		t.attempted = len(asked)
		var finalRefusal *plannedCall
		if t.xml != nil && t.xml.Final != nil {
			var note string
			finalRefusal, note = r.takeXMLReport(t.xml.Final, t)
			notes = append(notes, "final report in "+t.xml.Final.Slot+" "+acceptance(finalRefusal == nil))
			if note != "" {
				notes = append(notes, note)
			}
		}
		if len(asked) == 0 {
			if finalRefusal != nil {
				plan = append(plan, *finalRefusal)
			}
			return nil, nil, withNotes("no tool calls", notes)
		}
		c := r.contract
		var refused []string
		n := 0 // tool calls counted against the per-turn limit
		// An answer that took the run over max_tokens_consumed ends it at COMMIT whatever its
		// calls would return (seed 001: budgets before any success): none of them runs.
		tokensSpent := r.overTokenBudget()
		for _, a := range asked {
			call := a.call
			if call.GetName() == FinalReportTool && r.reportTool != nil && !a.xml {
				if refusal := r.takeReport(call, t); refusal != "" {
					plan = append(plan, plannedCall{call: call, refusal: refusal})
				}
				continue
			}
			n++
			why := ""
			switch {
			case c.GetToolPolicy() == typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN: // a violation in any turn
				t.forbiddenCall = true
				why = "tools are forbidden for this run"
			case tokensSpent:
				why = fmt.Sprintf("dropped: the run's budget of %d tokens is used up", c.GetMaxTokensConsumed())
			case t.finalTurn: // the request offered only the final report (issue 11.3)
				why = fmt.Sprintf("%s is not offered in this final turn; only %s may be called", call.GetName(), FinalReportTool)
			case n > int(c.GetMaxToolCallsPerTurn()):
				why = fmt.Sprintf("dropped: at most %d tool calls may run in one turn", c.GetMaxToolCallsPerTurn())
			case c.GetMaxToolCallsTotal() > 0 && int(r.toolCalls)+len(valid) >= int(c.GetMaxToolCallsTotal()):
				t.budgetExhausted = true
				why = fmt.Sprintf("dropped: the run's budget of %d tool calls is used up", c.GetMaxToolCallsTotal())
			case !slices.ContainsFunc(r.offered, func(tool *typev1.Tool) bool { return tool.GetName() == call.GetName() }):
				if call.GetArguments() == nil { // the adapter rejected it too (no name, broken arguments): malformed output
					t.malformed++
				}
				why = unknownTool(call.GetName(), r.offered)
			case call.GetArguments() == nil && t.cutOff && !a.xml && call == t.answer.GetToolCalls()[len(t.answer.GetToolCalls())-1]:
				t.malformed++
				why = "the arguments were cut off at the output token limit; call it again with shorter arguments"
			case call.GetArguments() == nil:
				t.malformed++
				why = invalidJSON(call.GetRawArguments())
			default: // cycle_forbid is checked as the calls run (execute): only executed calls make a sequence
				valid = append(valid, call)
				plan = append(plan, plannedCall{call: call, xml: a.xml, needsApproval: r.requiresApproval(call.GetName())})
				continue
			}
			refused = append(refused, call.GetName()+": "+why)
			plan = append(plan, plannedCall{call: call, xml: a.xml, refusal: "(tool failed: " + why + ")"})
		}
		if finalRefusal != nil {
			plan = append(plan, *finalRefusal)
		}
		detail := fmt.Sprintf("%d of %d calls valid", len(valid), len(calls))
		if len(refused) > 0 {
			detail += "; refused " + strings.Join(refused, "; ")
		}
		return &typev1.Message{ToolCalls: calls}, &typev1.Message{ToolCalls: valid}, withNotes(detail, notes)
	})
	return plan
}

// unknownTool is why a call to a tool that was not offered is refused.
func unknownTool(name string, offered []*typev1.Tool) string {
	return fmt.Sprintf("unknown tool %q; available tools: %s", name, strings.Join(toolname.Of(offered), ", "))
}

// invalidJSON is why a call whose arguments are not a JSON object is refused; it tells the
// model to retry (seed 000 §1).
func invalidJSON(raw string) string {
	return unusableArguments(raw) + "; call the tool again with its arguments as one JSON object"
}

// unusableArguments says what raw arguments the generation stage could not use are: JSON that
// is no object (an array, a string), or not valid JSON.
func unusableArguments(raw string) string {
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err == nil {
		if _, isObject := v.(map[string]any); !isObject {
			return fmt.Sprintf("the arguments are a JSON %s, not an object: %q", jsonrepair.Kind(v), raw)
		}
		return fmt.Sprintf("the arguments could not be used: %q", raw)
	}
	return fmt.Sprintf("the arguments are not valid JSON: %q", raw)
}

// askedCalls are the tool calls of the turn's answer, native ones first, then those of the
// XML slots, with the transcript notes of its transport tags. The ignored tags are kept to be
// told to the model on the next turn.
func (r *run) askedCalls(t *turnState) ([]askedCall, []string) {
	asked := make([]askedCall, 0, len(t.answer.GetToolCalls()))
	for _, call := range t.answer.GetToolCalls() {
		asked = append(asked, askedCall{call: call})
	}
	if t.xml == nil {
		return asked, nil
	}
	xmlCalls, notes := r.xmlCalls(t.xml)
	r.xmlIgnored = t.xml.Ignored
	return append(asked, xmlCalls...), append(notes, xmlNotes(t.xml)...)
}

// withNotes appends transcript notes to a step's detail.
func withNotes(detail string, notes []string) string {
	if len(notes) == 0 {
		return detail
	}
	return detail + "; " + strings.Join(notes, "; ")
}

// acceptance names a final report's fate in the transcript.
func acceptance(accepted bool) string {
	if accepted {
		return "accepted"
	}
	return "refused"
}

// refusalReason is the reason within a refused call's tool message "(tool failed: reason)",
// as its tool_refused event gives it.
func refusalReason(refusal string) string {
	return strings.TrimSuffix(strings.TrimPrefix(refusal, "(tool failed: "), ")")
}

// contextBudgetStub replaces a tool result that would overflow the context window (seed 000).
const contextBudgetStub = "(tool failed: context window budget exceeded)"

// takeReport accepts or refuses a final_report call; a refusal is the tool message that tells
// the model why, so it can fix the report in the (single) turn that remains. Of several calls
// in one answer the last valid one is the report (seed 000 §11: the last valid result is used
// when a single one is expected): a refused call does not undo one accepted before it.
func (r *run) takeReport(call *typev1.ToolCall, t *turnState) (refusal string) {
	rep, err := reportFromCall(r.contract, r.outputSchema, call)
	if err != nil {
		if t.report == nil {
			t.reportErr = err
		}
		return "(tool failed: " + FinalReportTool + ": " + err.Error() + ")"
	}
	t.report, t.reportErr = rep, nil
	return ""
}

func cycleForbidden(c *typev1.ExecutionContract, from, to string) bool {
	if from == "" {
		return false
	}
	return slices.ContainsFunc(c.GetCycleForbid(), func(p *typev1.ToolPair) bool {
		return p.GetFromTool() == from && p.GetToTool() == to
	})
}

// executeCalls answers the planned calls in order (Monolith: sequential, deterministic): a
// refused call with its refusal and a tool_refused event, a valid one as an EXECUTE state
// followed by an OBSERVE state.
// Native calls are answered with tool messages; calls written in XML slots with one user
// message, the turn's XML-PAST, that grows with each response (so the context guard counts
// it). Once a result is malformed (t.badResult), a stage answered outside its contract
// (t.badStage), or the run's tokens (an observation model's summaries) went over
// max_tokens_consumed, no further call runs: the run ends.
func (r *run) executeCalls(ctx context.Context, plan []plannedCall, t *turnState) {
	var (
		past    []xmltransport.ToolResponse
		pastMsg *typev1.Message
	)
	answer := func(p plannedCall, content string, ok bool, ms int64) {
		if !p.xml {
			r.conversation = append(r.conversation, &typev1.Message{
				Role: typev1.Role_ROLE_TOOL, Content: content, ToolCallId: p.call.GetId(), Name: p.call.GetName(),
			})
			return
		}
		past = append(past, pastResponse(p.call, content, ok, ms))
		if pastMsg == nil {
			pastMsg = &typev1.Message{Role: typev1.Role_ROLE_USER}
			r.conversation = append(r.conversation, pastMsg)
		}
		pastMsg.Content = xmltransport.RenderPast(past)
	}
	// refuse answers a call that never runs, and closes it for the run's clients.
	refuse := func(p plannedCall, refusal string) {
		answer(p, refusal, false, 0)
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_ToolRefused{ToolRefused: &eventv1.ToolRefused{
			Turn: r.turns, CallId: p.call.GetId(), ToolName: p.call.GetName(), Reason: refusalReason(refusal),
		}}})
	}
	for _, p := range plan {
		call := p.call
		if p.refusal != "" {
			refuse(p, p.refusal)
			continue
		}
		if r.toolsClosed {
			refuse(p, "(tool failed: not run: the context window budget is exhausted)")
			continue
		}
		if ctx.Err() != nil {
			refuse(p, "(tool failed: interrupted)")
			continue
		}
		if t.badResult != nil {
			refuse(p, "(tool failed: not run: the run ends because a tool result was malformed)")
			continue
		}
		if t.badStage != nil {
			refuse(p, "(tool failed: not run: the run ends because a stage answered outside its contract)")
			continue
		}
		if r.overTokenBudget() { // an earlier call's summary spent it: COMMIT ends the run
			refuse(p, fmt.Sprintf("(tool failed: not run: the run's budget of %d tokens is used up)",
				r.contract.GetMaxTokensConsumed()))
			continue
		}
		// cycle_forbid (seed 001): a transition is from the last call that ran to this one; a
		// call the action stage refused never ran and makes none.
		if t.cycle != "" {
			refuse(p, "(tool failed: not run: the run ends because the tool sequence "+t.cycle+" is forbidden by the contract)")
			continue
		}
		if cycleForbidden(r.contract, r.lastTool, call.GetName()) {
			t.cycle = r.lastTool + " -> " + call.GetName()
			refuse(p, "(tool failed: the tool sequence "+t.cycle+" is forbidden by the contract)")
			continue
		}
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_ToolStarted{ToolStarted: &eventv1.ToolStarted{Turn: r.turns, Call: call}}})
		var (
			res     *actionv1.ExecuteResponse
			altNote string
		)
		st := typev1.RunState_RUN_STATE_EXECUTE
		r.step(ctx, st, r.stepID(st)+"/"+call.GetId(), func(ctx context.Context) (proto.Message, proto.Message, string) {
			source := sourceNative
			if p.xml {
				source = sourceXML
			}
			res = r.callTool(ctx, call, p.approval, source, r.contract.GetToolTimeoutMs())
			switch {
			case res.GetErrorCode() == typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT:
				res, altNote = r.retryTimeout(ctx, call, res, p.approval, source)
			// An interrupted call may have had its effect: no alternative runs in its place.
			case res.GetErrorCode() == typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR && !res.GetInterrupted():
				res, altNote = r.tryAlternatives(ctx, call, res, source)
			}
			return call, res, call.GetName() + ": " + res.GetStatus().String()
		})
		if executed(res) { // a refused call (unknown tool, invalid arguments, no approval) never ran
			r.toolCalls++
			r.lastTool = call.GetName()
		}
		st = typev1.RunState_RUN_STATE_OBSERVE
		toolEntry := len(r.accounting) - 1 // the call's, before observing appends a summary's
		r.step(ctx, st, r.stepID(st)+"/"+call.GetId(), func(ctx context.Context) (proto.Message, proto.Message, string) {
			obs := r.observe(ctx, call, res, t)
			content := p.note + altNote + obs.GetObservation()
			if g, over := r.overflows(content); over {
				// Seed 000 §2: the result is dropped, the model sees the stub, no new tool
				// starts, and the next turn is the final one.
				r.emitGuard(ctx, g)
				if toolEntry >= 0 {
					entry := r.accounting[toolEntry]
					entry.Status = typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED
					entry.Error = fmt.Sprintf("context window budget exceeded: a result of %d tokens was replaced (projected %d, limit %d)",
						g.GetCounters().GetNew(), g.GetProjected(), g.GetLimit())
				}
				content = contextBudgetStub
				r.toolsClosed, r.forcedFinal = true, true
			}
			answer(p, content, res.GetStatus() == typev1.ToolStatus_TOOL_STATUS_SUCCESS && content != contextBudgetStub, res.GetExecutionTimeMs())
			r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_ToolFinished{ToolFinished: &eventv1.ToolFinished{
				Turn: r.turns, CallId: call.GetId(), ToolName: call.GetName(), Status: res.GetStatus(),
				Observation: content, ExecutionTimeMs: res.GetExecutionTimeMs(), Truncated: obs.GetTruncated(),
				Summarized: obs.GetSummarized(), SummaryError: obs.GetSummaryError(),
			}}})
			detail := observedDetail(content, obs)
			if track := r.trackCall(call, res, obs); track != "" {
				detail += "; " + track
			}
			return res, obs, detail
		})
	}
}

// executed reports whether the action stage ran the call (or may have: an interrupted one),
// rather than refusing it or being unreachable. Only executed calls count as tool calls: in
// tool_calls, for tool_policy required and for the outcome (Monolith invariant C).
func executed(res *actionv1.ExecuteResponse) bool {
	switch res.GetErrorCode() {
	case typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED, typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR,
		typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT:
		return true
	}
	return false
}

// callTool executes one call through the action stage and accounts it with its source
// (native or xml) and the action stage's attempts (its retries of transient failures), after
// the embeddings the call made. A refusal (unknown tool, invalid arguments, missing approval) or an
// unreachable action stage becomes an ERROR result the model sees; the recovery stage decides
// whether an unreachable stage is retried, within the run's max_retries. The tool may run for
// timeoutMs.
func (r *run) callTool(ctx context.Context, call *typev1.ToolCall, approval *actionv1.Approval, source string, timeoutMs int64) *actionv1.ExecuteResponse {
	start := time.Now()
	timeout := time.Duration(timeoutMs) * time.Millisecond
	req := &actionv1.ExecuteRequest{
		RunId: r.id, CallId: call.GetId(), ToolName: call.GetName(), Arguments: call.GetArguments(),
		Mode: actionv1.ExecutionMode_EXECUTION_MODE_DIRECT, TimeoutMs: timeoutMs, UserId: r.userID,
		Approval: approval,
	}
	var res *actionv1.ExecuteResponse
	for retry := 0; ; retry++ {
		if err := r.grant(req, timeout); err != nil {
			r.svc.log.ErrorContext(ctx, "signing an approval grant failed", "run_id", r.id, "call_id", call.GetId(), "err", err)
		}
		// knowledge_search searches the user's knowledge: with the run's assertion of its user.
		callCtx, cancel := context.WithTimeout(r.asserted(ctx, timeout), timeout+5*time.Second)
		resp, err := r.svc.peers.Action.Execute(callCtx, req)
		cancel()
		if err == nil {
			res = resp
			break
		}
		se := stageerr.FromError(err)
		res = &actionv1.ExecuteResponse{Status: typev1.ToolStatus_TOOL_STATUS_ERROR, Error: se.Error(), ErrorCode: se.Code}
		if !se.Retryable() || ctx.Err() != nil {
			break
		}
		// The run's retry budget bounds the retries (checkDecision): else a recovery stage that
		// always retries sends the call again until the run's time is up.
		d := r.recover(ctx, "action", se, retry, &recoveryv1.RecoveryState{
			RunId: r.id, ToolName: call.GetName(), TimeoutMs: timeoutMs, Arguments: call.GetArguments(),
			MaxRetries: r.contract.GetMaxRetries(), TimeLeftMs: r.timeLeft().Milliseconds(),
		})
		if d.GetStrategy() != recoveryv1.Strategy_STRATEGY_RETRY || !sleep(ctx, time.Duration(d.GetBackoffMs())*time.Millisecond) {
			break
		}
	}
	if broken := checkExecution(res); broken != nil {
		// The accounting is audited: the run keeps its own measure instead.
		r.svc.log.WarnContext(ctx, "tool numbers not used", "run_id", r.id, "tool", call.GetName(),
			"err", broken)
		res.ExecutionTimeMs, res.Attempts = max(res.GetExecutionTimeMs(), 0), max(res.GetAttempts(), 0)
	}
	if res.GetExecutionTimeMs() == 0 {
		res.ExecutionTimeMs = msSince(start)
	}
	// What the tool spent on the run's behalf (knowledge_search's embeddings) comes first:
	// it happened before the execution ended.
	for _, e := range res.GetAccounting() {
		r.account(e)
	}
	entry := &typev1.AccountingEntry{
		Type: typev1.AccountingType_ACCOUNTING_TYPE_TOOL, Server: res.GetServer(), Command: call.GetName(),
		Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK, LatencyMs: res.GetExecutionTimeMs(),
		CharactersIn: int64(len(argumentsJSON(call))), CharactersOut: int64(len(res.GetResult())), Source: source,
		Attempts: res.GetAttempts(),
	}
	if res.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS {
		entry.Status = typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED
		entry.Error = res.GetError()
		if res.GetStatus() == typev1.ToolStatus_TOOL_STATUS_TIMEOUT {
			entry.Error = "timeout"
		}
	}
	r.account(entry)
	return res
}

func argumentsJSON(call *typev1.ToolCall) string {
	if call.GetArguments() == nil {
		return call.GetRawArguments()
	}
	b, err := protojson.Marshal(call.GetArguments())
	if err != nil {
		return call.GetRawArguments()
	}
	return string(b)
}

// grantLifetime is how long an approval grant stays valid beyond the call's timeout: enough
// for the request to reach the action stage, never enough to be useful later.
const grantLifetime = time.Minute

// grant attaches a fresh approval grant to an approved request (one per attempt, so a retry
// is not refused as expired). Without a signing key the request goes without one, and the
// action stage refuses it.
func (r *run) grant(req *actionv1.ExecuteRequest, timeout time.Duration) error {
	if !req.GetApproval().GetApproved() || r.svc.grants == nil {
		return nil
	}
	g, err := r.svc.grants.Sign(grant.Call{
		RunID: req.GetRunId(), CallID: req.GetCallId(), Tool: req.GetToolName(),
		Arguments: req.GetArguments(), Approver: req.GetApproval().GetApprover(),
		User: req.GetUserId(),
	}, r.svc.now().Add(timeout+grantLifetime))
	if err != nil {
		return err
	}
	approval := proto.CloneOf(req.GetApproval())
	approval.Grant = g
	req.Approval = approval
	return nil
}

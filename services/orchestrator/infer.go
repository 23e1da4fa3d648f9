package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/pkg/xmltransport"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// assemble asks the context stage for the messages of the next inference and evaluates the
// context guard (seed 000 §2, "turn_preflight"). When the guard forces the final turn, the
// tools shrink to final_report and the guard is evaluated again with the smaller schema; if
// even that does not fit, the run ends MAX_CONTEXT_REACHED, so no request ever exceeds the
// limit. So does a context that left messages of the conversation out to fit the limit
// (seed 002 §6: no answer from a truncated history), whatever the guard projected.
func (r *run) assemble(ctx context.Context) ([]*typev1.Message, []*typev1.Tool, *ending) {
	var (
		messages []*typev1.Message
		tools    = r.turnTools()
		end      *ending
	)
	st := typev1.RunState_RUN_STATE_ASSEMBLE
	r.step(ctx, st, r.stepID(st), func(ctx context.Context) (proto.Message, proto.Message, string) {
		req, resp, err := r.assembleWith(ctx, tools)
		if err != nil {
			end = r.assemblyFailure(ctx, err)
			return req, nil, stageerr.FromError(err).Error()
		}
		guard := resp.GetGuard()
		r.emitGuard(ctx, guard)
		if guard.GetVerdict() == typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL && !r.forcedFinal {
			r.forcedFinal = true
			tools = r.turnTools()
			if req, resp, err = r.assembleWith(ctx, tools); err != nil {
				end = r.assemblyFailure(ctx, err)
				return req, nil, stageerr.FromError(err).Error()
			}
			guard = resp.GetGuard()
			guard.Reason = "after restricting the tools to " + FinalReportTool
			if r.xml != nil {
				guard.Reason = "after restricting the turn to the XML final slot"
			}
			r.emitGuard(ctx, guard)
		}
		if v := checkAssembly(resp); v != nil {
			end = v.turnEnding()
			return req, resp, end.reason
		}
		switch {
		case guard.GetVerdict() == typev1.GuardVerdict_GUARD_VERDICT_OVERFLOW || (r.forcedFinal && guard.GetLimit() > 0 && guard.GetProjected() > guard.GetLimit()):
			end = fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxContext, messageContextFull,
				fmt.Sprintf("context guard: projected %d tokens, limit %d, even for the final turn", guard.GetProjected(), guard.GetLimit()))
		case resp.GetDroppedMessages() > 0:
			// Seed 002 §6: the model never answers from a truncated conversation.
			end = fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxContext, messageContextFull,
				fmt.Sprintf("the context stage left out %d message(s) of the conversation to fit its budget of %d tokens",
					resp.GetDroppedMessages(), req.GetMaxTokens()))
		}
		messages = resp.GetMessages()
		shareHistory(messages, r.conversation)
		if notice := r.finalNotice(); notice != nil {
			messages = append(messages, notice)
		}
		detail := fmt.Sprintf("%d messages, %d tokens, %d dropped, guard %s (ctx %d, pending %d, schema %d; projected %d, limit %d)",
			len(messages), resp.GetTokenCount(), resp.GetDroppedMessages(), guard.GetVerdict(), guard.GetCounters().GetCtx(),
			guard.GetCounters().GetPending(), guard.GetCounters().GetSchema(), guard.GetProjected(), guard.GetLimit())
		if resp.GetMemoryUnavailable() {
			detail += "; MEMORY_UNAVAILABLE: continuing without memory"
			// Recovery decides (fallback: go on without memory) and the decision is the event
			// that tells watchers memory was unavailable.
			r.recover(ctx, "context", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_UNAVAILABLE,
				"memory was unavailable; the context was assembled without it"), 0, nil)
		}
		return req, resp, detail
	})
	return messages, tools, end
}

// messageContextFull is the user-facing text of MAX_CONTEXT_REACHED (seed 002: explain the
// limit and advise starting over).
const messageContextFull = "This conversation no longer fits the model's context window. Please start a new conversation."

// finalNotice is the system message that tells the model why its turn is final, appended to
// the assembled context of a final turn; nil for another turn.
func (r *run) finalNotice() *typev1.Message {
	if instruction := finalInstructions[r.finalReason()]; instruction != "" {
		return &typev1.Message{Role: typev1.Role_ROLE_SYSTEM, Content: instruction}
	}
	return nil
}

// assemblyFailure ends a run whose context stage failed with err, on a turn's request or on
// the forced final turn's after it: MAX_CONTEXT_REACHED for CONTEXT_OVERFLOW, the stage's
// failure otherwise (stageEnding); nil when the run's context ended, which ends the run as
// it says.
func (r *run) assemblyFailure(ctx context.Context, err error) *ending {
	se := stageerr.FromError(err)
	switch {
	case errors.Is(se, stageerr.ErrContextOverflow):
		return fail(typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxContext,
			messageContextFull, se.Error())
	case ctx.Err() != nil:
		return nil
	}
	return r.stageEnding(ctx, "context", err)
}

// assembleWith makes one Assemble call for the coming request with the given tools and
// accounts the requests the context stage made for it. A final turn's notice, appended after
// the assembly, is counted with what the turn adds (seed 000 §2: nudges count toward the
// pending tokens) and left out of the budget the assembly fits, so that the request sent fits
// the window as the guard projected.
func (r *run) assembleWith(ctx context.Context, tools []*typev1.Tool) (*contextv1.AssembleRequest, *contextv1.AssembleResponse, error) {
	c := r.contract
	limit := r.limit()
	if limit == 0 {
		limit = 1 << 40
	}
	var notice int64
	if m := r.finalNotice(); m != nil {
		notice = r.counter.Message(m)
	}
	req := &contextv1.AssembleRequest{
		RunId:                     r.id,
		UserId:                    r.userID,
		History:                   r.conversation,
		MaxTokens:                 max(limit-r.counter.Tools(tools)-notice, 1),
		Counters:                  &typev1.GuardCounters{Ctx: r.ctxTokens, Pending: r.counter.Messages(r.conversation[r.sentUpTo:]) + notice},
		Tools:                     tools,
		ContextWindow:             c.GetContextWindow(),
		ContextWindowBufferTokens: c.GetContextWindowBufferTokens(),
		MaxOutputTokens:           c.GetMaxOutputTokens(),
		ForceSynthesisAtRatio:     c.GetForceSynthesisAtRatio(),
		Model:                     firstModel(c),
		CurrentStep:               r.tracker.current().GetStep(),
		Plan:                      r.tracker.progress(),
	}
	if r.turns == 1 {
		req.MemoryQuery = r.goal
	} else {
		req.Recalled = r.recalled // every turn's model sees what the first recalled
	}
	// Context assembly searches the user's memories, which the memory stage shows it only with
	// the run's assertion of its user.
	resp, err := whenReady(r.asserted(ctx, 0), "context", r.svc.peers.Context.Assemble, req)
	if err == nil && r.turns == 1 {
		r.recalled = resp.GetRecalled()
	}
	for _, e := range resp.GetAccounting() { // the memory search's query embedding
		r.account(e)
	}
	return req, resp, err
}

// limit is the context guard's limit, window − buffer − max output; 0 without a window.
func (r *run) limit() int64 {
	c := r.contract
	if c.GetContextWindow() == 0 {
		return 0
	}
	return c.GetContextWindow() - c.GetContextWindowBufferTokens() - c.GetMaxOutputTokens()
}

// overflows is the guard's "tool_preflight": whether committing a tool result of content
// would push the next request past the limit. It returns the evaluation.
func (r *run) overflows(content string) (*typev1.GuardReport, bool) {
	limit := r.limit()
	if limit == 0 {
		return nil, false
	}
	counters := &typev1.GuardCounters{
		Ctx:     r.ctxTokens,
		Pending: r.counter.Messages(r.conversation[r.sentUpTo:]),
		New:     r.counter.Message(&typev1.Message{Role: typev1.Role_ROLE_TOOL, Content: content}),
		Schema:  r.counter.Tools(r.turnTools()),
	}
	projected := counters.GetCtx() + counters.GetPending() + counters.GetNew() + counters.GetSchema()
	g := &typev1.GuardReport{Counters: counters, Projected: projected, Limit: limit, Verdict: typev1.GuardVerdict_GUARD_VERDICT_OK, Trigger: "tool_preflight"}
	if projected > limit {
		g.Verdict, g.Reason = typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL, "context"
	}
	return g, projected > limit
}

func (r *run) emitGuard(ctx context.Context, g *typev1.GuardReport) {
	if g == nil {
		return
	}
	r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_ContextGuard{ContextGuard: &eventv1.ContextGuardEvaluated{Turn: r.turns, Report: g}}})
}

// infer makes up to max_retries LLM attempts, cycling over the targets (seed 000 §3), with the
// recovery stage deciding after each failure. The answer is appended to the conversation and
// set as t.answer. In the XML modes every attempt ends with the turn's ephemeral XML-NEXT
// message, and the answer's tags are parsed into t.xml.
//
// The loop tells recovery what the turn has seen: the targets rate-limited in the current
// round-robin cycle with their Retry-After (recovery waits only once all of them are), the
// targets that refused the request as invalid (never tried again), the run's time left, and
// whether the attempt was the turn's last. When the targets cannot answer, recovery may name
// the contract's fallback_target (config models.fallback): it gets one more attempt, the
// turn's last, accounted like any other. When recovery asks the user, the turn pauses for
// the answer (t.ask) instead of ending the run.
//
// An answer cut off at the output token limit (stop reason length) is not taken as final
// (seed 000: truncation is incomplete, retry): a text answer, a final_report call whose
// arguments were cut off, or an unclosed XML final report is retried with an ephemeral notice
// (CutOffNotice, or the XML one naming the closing tag), like an empty answer. The last attempt's cut-off answer is kept rather than
// thrown away, and t.truncated flags it: its report is PARTIAL. t.cutOff says the answer
// stopped at the limit, so a tool call cut off in it is refused as such. No attempt follows
// one that took the run over max_tokens_consumed.
func (r *run) infer(ctx context.Context, messages []*typev1.Message, tools []*typev1.Tool, t *turnState) *ending {
	var end *ending
	st := typev1.RunState_RUN_STATE_INFER
	r.step(ctx, st, r.stepID(st), func(ctx context.Context) (proto.Message, proto.Message, string) {
		targets := r.contract.GetTargets()
		maxRetries := int(r.contract.GetMaxRetries())
		var (
			notice   *typev1.Message
			lastErr  *stageerr.Error
			next     *typev1.Target
			limited  []*recoveryv1.RateLimitedTarget // rate-limited in the current cycle
			rejected []*typev1.Target                // refused the request as invalid
			empty    int                             // answers without anything in them, or filtered
			skipped  string                          // why the fallback was not asked (fallbackMisfit)
			filtered int                             // of those, answers the content filter stopped
			failed   int                             // attempts that failed
			failure  *stageerr.Error                 // the last of those failures
		)
		xmlNext := r.xmlNext(tools)
		// The fallback model (recovery's choice once the targets cannot answer) gets one
		// attempt, the turn's last.
		last := maxRetries
		for attempt := 1; attempt <= last; attempt++ {
			if attempt > 1 && r.overTokenBudget() {
				// The attempts so far took the run over max_tokens_consumed: COMMIT ends it
				// whatever another attempt would answer (seed 001), so none is made.
				end = r.tokenBudgetSpent()
				return nil, nil, fmt.Sprintf("no attempt %d: %s", attempt, end.reason)
			}
			target := roundRobin(targets, attempt, rejected)
			if next != nil {
				target, next = next, nil
			}
			send := messages
			if notice != nil || xmlNext != nil {
				send = slices.Clone(messages)
				for _, m := range []*typev1.Message{notice, xmlNext} {
					if m != nil {
						send = append(send, m)
					}
				}
			}
			resp, err := r.generate(ctx, attempt, target, send, r.providerTools(tools))
			if err != nil {
				if ctx.Err() != nil {
					return nil, nil, "interrupted: " + context.Cause(ctx).Error()
				}
				lastErr = stageerr.FromError(err)
				failed, failure = failed+1, lastErr
				d := r.recover(ctx, "generation", lastErr, attempt-1, &recoveryv1.RecoveryState{
					RunId: r.id, Target: target, Targets: targets, MaxRetries: r.contract.GetMaxRetries(),
					RateLimited: limited, RejectedTargets: rejected, TimeLeftMs: r.timeLeft().Milliseconds(),
					FallbackTarget: r.contract.GetFallbackTarget(), LastAttempt: attempt == last,
				})
				limited = nextCycle(limited, target, lastErr)
				if lastErr.TargetRefused() {
					rejected = append(rejected, target)
				}
				switch d.GetStrategy() {
				case recoveryv1.Strategy_STRATEGY_ABORT:
					end = providerEnding(lastErr)
					return nil, nil, "aborted: " + lastErr.Error()
				case recoveryv1.Strategy_STRATEGY_ASK_USER:
					if r.turns >= r.contract.GetMaxTurns() {
						// The last turn: no turn follows to use an answer, so none is asked
						// for, and the failure ends the run as an abort does.
						end = providerEnding(lastErr)
						return nil, nil, "aborted: no turn remains under max_turns to use an answer: " + lastErr.Error()
					}
					t.ask = &askUser{question: d.GetUserMessage(), reason: "generation: " + lastErr.Error()}
					return nil, nil, "the user is asked how to proceed: " + lastErr.Error()
				case recoveryv1.Strategy_STRATEGY_RETRY:
					if d.GetBackoffMs() > 0 {
						if !sleep(ctx, time.Duration(d.GetBackoffMs())*time.Millisecond) {
							return nil, nil, "interrupted while backing off"
						}
						limited = nil // the wait ends the cycle
					}
				}
				next = d.GetModifiedAction().GetTarget()
				if fb := r.contract.GetFallbackTarget(); fb != nil && proto.Equal(next, fb) {
					if skipped = r.svc.fallbackMisfit(r.contract, send, r.providerTools(tools)); skipped != "" {
						break // the failure ends the turn, as it would without a fallback
					}
					last = attempt + 1
				}
				continue
			}
			limited = nil
			r.sentUpTo = len(r.conversation)
			u := resp.GetUsage()
			// Seed 000 §2: input + output + cache reads, its input counting the uncached prompt
			// tokens only (Anthropic's input_tokens); a TokenUsage's input counts them all
			// (OpenAI's prompt_tokens: cached included), so cached is in it already.
			r.ctxTokens = u.GetInput() + u.GetOutput()
			if resp.GetStopReason() == stopContentFilter || resp.GetContent() == "" && len(resp.GetToolCalls()) == 0 && resp.GetReasoning() == "" {
				// Seed 000: not added to the conversation; one ephemeral notice; counts as an attempt.
				// An answer the content filter stopped is not the model's answer, whatever part of
				// it was delivered before the filter stopped it: it is retried as a withheld one.
				notice = &typev1.Message{Role: typev1.Role_ROLE_USER, Content: EmptyResponseNotice}
				if empty++; resp.GetStopReason() == stopContentFilter {
					// Withheld, not left empty, by the model: the notice says so.
					notice.Content = ContentFilteredNotice
					filtered++
				}
				lastErr = nil
				continue
			}
			var tags *xmltransport.Result
			if r.xml != nil {
				res := r.readXML(resp.GetContent(), resp.GetStopReason(), t.finalTurn)
				tags = &res
			}
			if again := r.cutOffNotice(resp, tags); again != nil {
				if attempt < maxRetries {
					notice, lastErr = again, nil
					continue
				}
				t.truncated = true // the last attempt: its answer is kept as it was cut off
			}
			detail := fmt.Sprintf("attempt %d: %s/%s answered (%s)", attempt, resp.GetProvider(), resp.GetModel(), resp.GetAdapterStatus())
			if tags != nil {
				if tags.Incomplete {
					*tags = r.readXML(resp.GetContent(), "stop", t.finalTurn)
					detail += "; the final report was cut off before its closing tag in every attempt and is kept as it is"
				}
				r.xml.NextSlot = tags.NextSlot
				t.xml = tags
				for _, w := range tags.Warnings {
					detail += "; " + w
				}
			}
			if t.cutOff = resp.GetStopReason() == stopLength; t.cutOff {
				detail += "; cut off at the output token limit"
			}
			r.uniqueCallIDs(resp.GetToolCalls())
			t.answer = &typev1.Message{
				Role: typev1.Role_ROLE_ASSISTANT, Content: resp.GetContent(), Reasoning: resp.GetReasoning(),
				ToolCalls: resp.GetToolCalls(), ReasoningState: resp.GetReasoningState(),
			}
			r.conversation = append(r.conversation, t.answer)
			if u.GetInput() == 0 || u.GetEstimated() {
				// No usage reported (a local server may stream none; the generation stage then
				// estimates it): the guard counts the conversation itself, with the model's
				// counter, where it counted nothing and never forced a final turn.
				r.ctxTokens = r.counter.Messages(r.conversation)
			}
			return nil, resp, detail
		}
		if lastErr != nil {
			end = providerEnding(lastErr)
			if skipped != "" {
				skipped = "; " + skipped
			}
			return nil, nil, "attempts exhausted: " + lastErr.Error() + skipped
		}
		reason := "the model returned only empty responses"
		switch {
		case filtered > 0 && filtered == empty:
			reason = "the provider's content filter withheld or stopped every answer of the model (stop reason content_filter)"
		case filtered > 0:
			reason += fmt.Sprintf(", %d of %d withheld or stopped by the provider's content filter (stop reason content_filter)", filtered, empty)
		}
		if failed > 0 {
			// The empty answers came after failures, which the reason does not hide.
			reason = fmt.Sprintf("no attempt answered: %d attempt%s failed (the last: %s) and %d came back empty",
				failed, plural(failed), failure.Error(), empty)
			if filtered > 0 {
				reason += fmt.Sprintf(", %d of them withheld or stopped by the provider's content filter (stop reason content_filter)", filtered)
			}
		}
		end = fail(typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, ExitGenerationFailure, MessageProviderFailure, reason)
		end.retryable = true
		return nil, nil, end.reason
	})
	return end
}

// uniqueCallIDs gives each of calls, an answer's, whose id an earlier call of the run or of
// the answer has, an id of its own: the id with _2, _3 ... A call's id names its execution
// (the action stage keeps its result under the run and the id, to answer a call retried after
// a crash without running it again), so a model that used an id twice (call_1 in each turn)
// got the first call's result for the second, which never ran. The conversation holds the
// new id, in the call and in its result, so the model sees one call a result.
func (r *run) uniqueCallIDs(calls []*typev1.ToolCall) {
	if len(calls) == 0 {
		return
	}
	used := map[string]bool{}
	for _, m := range r.conversation {
		for _, c := range m.GetToolCalls() {
			used[c.GetId()] = true
		}
	}
	for _, c := range calls {
		id := c.GetId()
		for n := 2; used[c.GetId()]; n++ {
			c.Id = fmt.Sprintf("%s_%d", id, n)
		}
		used[c.GetId()] = true
	}
}

// stopLength is the normalised stop reason of an answer cut off at the output token limit.
const stopLength = "length"

// stopContentFilter is the normalised stop reason of an answer the provider's content filter
// stopped (OpenAI's content_filter, Anthropic's refusal).
const stopContentFilter = "content_filter"

// cutOffNotice is the ephemeral notice that asks again for a final answer cut off at the
// output token limit (seed 000: truncation is incomplete, retry), or nil when the answer is
// not one: an unclosed XML final report (its notice names the closing tag), a text answer
// without transport tags or tool calls, or a final_report call whose arguments the generation
// stage rejected as unfinished.
func (r *run) cutOffNotice(resp *generationv1.GenerateResponse, tags *xmltransport.Result) *typev1.Message {
	if tags != nil && tags.Incomplete {
		return r.incompleteNotice(resp.GetStopReason())
	}
	if resp.GetStopReason() != stopLength || usedTags(tags) {
		return nil
	}
	calls := resp.GetToolCalls()
	cut := len(calls) == 0 && resp.GetContent() != "" || slices.ContainsFunc(calls, func(c *typev1.ToolCall) bool {
		return c.GetName() == FinalReportTool && c.GetArguments() == nil
	})
	if !cut {
		return nil
	}
	return &typev1.Message{Role: typev1.Role_ROLE_USER, Content: CutOffNotice}
}

// roundRobin is the target of an attempt (seed 000 §3: attempt N uses targets[(N-1) % len]),
// or the first one after it that has not refused the request.
func roundRobin(targets []*typev1.Target, attempt int, rejected []*typev1.Target) *typev1.Target {
	for k := range len(targets) {
		t := targets[(attempt-1+k)%len(targets)]
		if !slices.ContainsFunc(rejected, func(x *typev1.Target) bool { return proto.Equal(x, t) }) {
			return t
		}
	}
	return targets[(attempt-1)%len(targets)]
}

// maxOutput is the output token limit a request to target asks for: the contract's, which
// its targets' limits set, or, for its fallback target, whose limits the contract does not
// take, the fallback model's configured max_output_tokens where that is lower.
func (s *Service) maxOutput(c *typev1.ExecutionContract, target *typev1.Target) int64 {
	out := c.GetMaxOutputTokens()
	if fb := c.GetFallbackTarget(); s.limits != nil && fb != nil && proto.Equal(target, fb) {
		if _, _, o := s.limits(fb); o > 0 && (out == 0 || o < out) {
			out = o
		}
	}
	return out
}

// fallbackMisfit says why a request of messages and tools is not sent to the contract's
// fallback target: with the output it asks for and the model's buffer it exceeds the context
// window configured for the model (providers.*.models.*, else the defaults'); "" when it fits
// or no limits are configured. Sent anyway, the provider refuses it (HTTP 400), and that
// refusal, not the failure the fallback was to rescue, would end the run.
func (s *Service) fallbackMisfit(c *typev1.ExecutionContract, messages []*typev1.Message, tools []*typev1.Tool) string {
	fb := c.GetFallbackTarget()
	if s.limits == nil || fb == nil {
		return ""
	}
	window, buffer, _ := s.limits(fb)
	out := s.maxOutput(c, fb)
	need, fits := tokens.FitsWindow(fb.GetModel(), messages, tools, window, buffer, out)
	if fits {
		return ""
	}
	return fmt.Sprintf("the fallback model %s/%s was not asked: the request's %d tokens, with %d of output and "+
		"a buffer of %d, do not fit its context window of %d tokens", fb.GetProvider(), fb.GetModel(), need, out, buffer, window)
}

// timeLeft is how long the run may still go on under total_timeout_ms; at least 1 ms.
func (r *run) timeLeft() time.Duration {
	total := time.Duration(r.contract.GetTotalTimeoutMs()) * time.Millisecond
	return max(total-r.svc.now().Sub(r.startedAt), time.Millisecond)
}

// generate makes one LLM attempt: streamed, with deltas as llm_delta events, when the
// contract streams answers (a run started with StreamRun), else in one request. With the
// response cache, a miss streams as any attempt does, and a hit, answered from the generation
// stage's cache, emits no llm_delta (seed 002 §8). The attempt is accounted and announced as
// llm_response whether it succeeds or fails.
func (r *run) generate(ctx context.Context, attempt int, target *typev1.Target, messages []*typev1.Message, tools []*typev1.Tool) (*generationv1.GenerateResponse, error) {
	start := time.Now()
	req := &generationv1.GenerateRequest{
		RunId:        r.id,
		Target:       target,
		Messages:     messages,
		Tools:        tools,
		Sampling:     &generationv1.Sampling{MaxOutputTokens: r.svc.maxOutput(r.contract, target)},
		StrictMode:   r.contract.GetStrictMode(),
		OutputFormat: r.contract.GetOutputFormat(),
		UseCache:     r.contract.GetCacheResponses(),
	}
	if len(tools) > 0 {
		req.ToolChoice = "auto"
	}
	var (
		resp *generationv1.GenerateResponse
		err  error
	)
	if r.contract.GetStreamAnswers() {
		resp, err = r.streamGenerate(ctx, attempt, req)
	} else {
		resp, err = r.svc.peers.Generation.Generate(ctx, req, keepNoCopy)
	}
	entry := &typev1.AccountingEntry{
		Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Provider: target.GetProvider(), Model: target.GetModel(),
		Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK, LatencyMs: msSince(start), Source: sourceNative,
		Attempts: 1, // one provider request: nothing below the orchestrator retries it
	}
	ev := &eventv1.LlmResponse{Turn: r.turns, Attempt: int32(attempt), Provider: target.GetProvider(), Model: target.GetModel()}
	if err != nil {
		se := generationFailure(err)
		err = se
		entry.Status = typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED
		entry.Error = se.Error()
		ev.Error = entry.Error
		// A failure of an answer the provider gave (MAX_TOKENS_EXCEEDED: cut off before it had
		// any content; or one that broke off after part of it arrived) carries the answer's
		// accounting: its tokens were spent and paid for.
		if spent := se.AccountAnswer(entry); spent != nil {
			ev.Usage, ev.StopReason = spent, entry.StopReason
			ev.ActualModel, ev.CostUsd = entry.ActualModel, entry.CostUsd
			r.addUsage(spent)
		}
	} else {
		entry.Tokens = resp.GetUsage()
		if resp.GetCached() {
			// Answered from the generation stage's cache: no request was sent, so none of the
			// answer's tokens were consumed (its usage, which the context guard still counts, is
			// the request that filled the cache), as none of its cost was.
			entry.Attempts, entry.Tokens = 0, &typev1.TokenUsage{}
		}
		entry.StopReason = resp.GetStopReason()
		entry.ActualModel, entry.CostUsd = resp.GetModel(), resp.GetCostUsd()
		ev.Message = &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: resp.GetContent(), Reasoning: resp.GetReasoning(), ToolCalls: resp.GetToolCalls()}
		ev.Usage, ev.Cached, ev.StopReason = entry.GetTokens(), resp.GetCached(), resp.GetStopReason()
		ev.ActualModel, ev.CostUsd = resp.GetModel(), resp.GetCostUsd()
		r.addUsage(entry.GetTokens())
	}
	r.account(entry)
	r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_LlmResponse{LlmResponse: ev}})
	return resp, err
}

// generationFailure is the failure of a Generate or GenerateStream call: one gRPC gives
// without a stage contract's detail (an answer over grpc.max_message_bytes, a replacement stage
// lacking the method) is the generation stage's GENERATION_FAILED of class BAD_RESPONSE, an
// answer that did not arrive as the contract's, which the run recovers from by its rules.
func generationFailure(err error) *stageerr.Error {
	return stageerr.FromStage(err, "generation",
		typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED,
		typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE)
}

// keepNoCopy is the call option of a Generate call: gRPC keeps no copy of the request to
// send it again. gRPC keeps a call's encoded request until the call commits, to retry it
// transparently on another connection should the stage refuse it unread; a unary call commits
// only when its answer is in, so the copy (the whole conversation) would live as long as the
// model takes, for every run waiting on one. Without it a call refused unread fails
// UNAVAILABLE, as any failure of the stage does, and the run recovers from it: a stage that
// stops gracefully tells its callers before it refuses calls, so that is rare. (A streamed
// attempt drops the copy once the stage has sent its headers, streamGenerate.)
var keepNoCopy = grpc.MaxRetryRPCBufferSize(0)

// streamGenerate makes a streamed attempt, the turn's attempt-th. Its deltas go out as
// llm_delta events of that attempt, at most one per deltaInterval (see deltas). In the XML
// modes the content deltas pass through the transport's stream buffer: text is passed on at
// once, a transport tag only once it is complete (seed 000 §11, Streaming).
func (r *run) streamGenerate(ctx context.Context, attempt int, req *generationv1.GenerateRequest) (*generationv1.GenerateResponse, error) {
	// The calls come complete in the final answer, and llm_delta carries text only: a message
	// for each fragment of their arguments would be read and dropped.
	stream, err := r.svc.peers.Generation.GenerateStream(ctx, &generationv1.GenerateStreamRequest{Request: req, OmitToolCallDeltas: true})
	if err != nil {
		return nil, err
	}
	// Waiting for the headers first lets gRPC drop the copy of the request it keeps to retry
	// the call on another connection, once the stage has taken the call (the project's stage
	// sends them at once), instead of holding it while the model answers.
	if _, err := stream.Header(); err != nil {
		return nil, err
	}
	var tags *xmltransport.Stream
	if r.xml != nil {
		tags = xmltransport.NewStream(r.xml.Nonce)
	}
	pending := newDeltas(ctx, r, attempt)
	defer pending.flush() // before the caller's llm_response, or the attempt's failure
	delta := pending.add
	content := func(pieces []xmltransport.Piece) {
		for _, p := range pieces {
			delta(p.Text, "")
		}
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, 0, "the generation stream ended without a final answer")
		}
		if err != nil {
			return nil, err
		}
		if d := chunk.GetDelta(); d != nil {
			// A delta without content or reasoning is a tool-call fragment: the calls are
			// announced complete in llm_response.
			if tags == nil {
				delta(d.GetContent(), d.GetReasoning())
				continue
			}
			delta("", d.GetReasoning())
			if d.GetContent() != "" {
				content(tags.Write(d.GetContent()))
			}
			continue
		}
		if f := chunk.GetFinal(); f != nil {
			if tags != nil {
				content(tags.Flush())
			}
			// Read the stream's end too: until then gRPC keeps the call open (its span, and a
			// goroutine watching its context) for as long as ctx lives.
			if _, err := stream.Recv(); !errors.Is(err, io.EOF) && err != nil {
				r.svc.log.DebugContext(ctx, "the generation stream ended badly after its final answer", "run_id", r.id, "err", err)
			}
			return f, nil
		}
	}
}

// sleep waits d or until ctx ends; it reports whether the full wait happened.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// plural is the suffix "s" of a count n other than one.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

package orchestrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"google.golang.org/protobuf/proto"
)

var (
	confirmWords = regexp.MustCompile(`(?i)^\s*(yes|y|yeah|yep|sure|ok|okay|confirm|confirmed|go ahead|do it|proceed)\b`)
	declineWords = regexp.MustCompile(`(?i)^\s*(no|n|nope|cancel|stop|don't|do not|abort)\b`)
)

// Decide makes one decision step (seed 004's DecisionContext → AgentDecision) without
// executing any tool: a clarification for a vague message, the model's tool calls (a
// confirmation request when one of them needs approval) or its text answer. A failed model
// request is handled as a run's inference handles it: the recovery stage decides whether to
// try again, on which target and after what wait (a rate limit's Retry-After once every target
// is limited), a target that refused the request as invalid is not sent it again, and the
// fallback model gets one more attempt, the last, once the targets cannot answer. An empty
// answer (no text, no tool call), one the content filter stopped, or a text answer cut off at
// the output token limit (with CutOffNotice; the last attempt's is kept) is tried again, as a
// run's is. Provider failures and empty answers that remain become RESPOND_ONLY with seed
// 004's canned messages.
// The intent is taken only within the intent contract (checkIntent; else INTERNAL). The model
// is offered the tools a run under the default contract may use (its tool_policy, else the
// intent's; its allowed_tools), and a decision only calls those: a tool call under a forbidden
// tool policy answers the run's policy violation message, and a call to a tool not offered or
// with arguments that are not JSON (in strict mode, arguments that need repair) is refused to
// the model, which is asked again, as a run does.
func (s *Service) Decide(ctx context.Context, req *agentv1.DecideRequest) (*typev1.AgentDecision, error) {
	if strings.TrimSpace(req.GetMessage()) == "" {
		return nil, stageerr.Invalid("message must not be empty")
	}
	if err := validateInput(req.GetUserId(), req.GetConversationId(), req.GetMessage(), "message_history", req.GetMessageHistory(), req.GetSurface()); err != nil {
		return nil, err
	}
	if err := checkPendingConfirmation(req.GetPendingConfirmation()); err != nil {
		return nil, err
	}
	userID, err := s.callerID(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	ctx = auth.OutgoingUser(ctx, userID) // the stages' calls act for the user, as a run's do
	if p := req.GetPendingConfirmation(); p != nil && len(p.GetToolCalls()) > 0 {
		switch {
		case confirmWords.MatchString(req.GetMessage()):
			// The calls are the caller's: confirmed, they are made as they are, so each must
			// name a tool there is, and one the default contract lets a run use.
			all, err := s.listTools(ctx)
			if err != nil {
				return nil, stageerr.FromError(err)
			}
			tools := offeredTools(&typev1.ExecutionContract{ToolPolicy: s.contract.GetToolPolicy(), AllowedTools: s.contract.GetAllowedTools()}, all)
			for i, c := range p.GetToolCalls() {
				if !slices.ContainsFunc(tools, func(t *typev1.Tool) bool { return t.GetName() == c.GetName() }) {
					return nil, stageerr.Invalid("pending_confirmation.tool_calls[%d]: %s", i, unknownTool(c.GetName(), tools))
				}
			}
			return &typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_INVOKE_TOOL, ToolCalls: p.GetToolCalls()}, nil
		case declineWords.MatchString(req.GetMessage()):
			return respond("Okay, I won't do that."), nil
		}
	}
	tools, err := s.listTools(ctx)
	if err != nil {
		return nil, stageerr.FromError(err)
	}
	var spent decideAccount
	wait := modelStageWait(s.contract) // the intent stage may ask its model first
	intent, err := whenReadyWithin(ctx, "intent", wait, s.peers.Intent.Parse, &intentv1.ParseRequest{
		Message: req.GetMessage(), ConversationId: req.GetConversationId(), Surface: req.GetSurface(),
		UserId: userID, AvailableTools: toolname.Of(tools),
	})
	spent.add(stageIntent, intent.GetAccounting()...)
	switch se := stageerr.FromError(err); {
	case err == nil:
	case errors.Is(se, stageerr.ErrIntentUnsafe):
		spent.add(stageIntent, se.Accounting...)
		return spent.on(respond("I can't help with that request.")), nil
	case errors.Is(se, stageerr.ErrIntentUnclear):
		spent.add(stageIntent, se.Accounting...)
		return spent.on(&typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION,
			ClarificationQuestion: MessageClarify}), nil
	default:
		return nil, se
	}
	if broken := checkIntent(intent); broken != nil {
		// As a run ends STAGE_CONTRACT_VIOLATION before any turn: the answer is not used.
		return nil, &stageerr.Error{Stage: stageIntent, Msg: broken.Error(), Accounting: spent.entries}
	}
	if intent.GetNeedsClarification() {
		return spent.on(&typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION,
			ClarificationQuestion: cmp.Or(intent.GetClarificationQuestion(), MessageClarify)}), nil // as a run asks
	}
	// As a run's: the contract's tool policy, else the intent's, and its allowed tools.
	policy := cmp.Or(s.contract.GetToolPolicy(), intent.GetToolPolicy())
	offered := offeredTools(&typev1.ExecutionContract{ToolPolicy: policy, AllowedTools: s.contract.GetAllowedTools()}, tools)
	prompt := withIntent(s.profiles[""].prompt, taskTypeName(intent.GetTaskType()), intent.GetConstraints())
	system := &typev1.Message{Role: typev1.Role_ROLE_SYSTEM, Content: prompt}
	user := &typev1.Message{Role: typev1.Role_ROLE_USER, Content: req.GetMessage()}
	messages, err := fitWindow(s.contract, system, req.GetMessageHistory(), user, nil, offered)
	if err != nil {
		return nil, err
	}

	var (
		refusals []*typev1.Message // the refused answers and their refusals, oldest first
		notice   *typev1.Message   // the next attempt's ephemeral cut-off notice
		lastErr  *stageerr.Error
		next     *typev1.Target                  // the target recovery chose for the next attempt
		limited  []*recoveryv1.RateLimitedTarget // rate-limited in the current round-robin cycle
		rejected []*typev1.Target                // refused the request as invalid: never sent it again
	)
	targets, maxRetries := s.contract.GetTargets(), int(s.contract.GetMaxRetries())
	// The fallback model (recovery's choice once the targets cannot answer) gets one attempt,
	// the decision's last, as in a run's turn.
	last := maxRetries
	for attempt := 0; attempt < last; attempt++ {
		target, start := roundRobin(targets, attempt+1, rejected), time.Now()
		if next != nil {
			target, next = next, nil
		}
		send := messages
		if notice != nil {
			// Appended for this attempt only, fitted to the window with the rest.
			if fitted, err := fitWindow(s.contract, system, req.GetMessageHistory(), user,
				append(slices.Clone(refusals), notice), offered); err == nil {
				send = fitted
			}
			notice = nil
		}
		resp, err := s.peers.Generation.Generate(ctx, &generationv1.GenerateRequest{
			Target: target, Messages: send, Tools: offered,
			Sampling:   &generationv1.Sampling{MaxOutputTokens: s.maxOutput(s.contract, target)},
			StrictMode: s.contract.GetStrictMode(), // as a run's requests: no repair of malformed calls
		})
		entry := &typev1.AccountingEntry{
			Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Provider: target.GetProvider(), Model: target.GetModel(),
			Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK, LatencyMs: msSince(start), Source: sourceNative, Attempts: 1,
			TimestampMs: s.now().UnixMilli(), // when the request finished, as a run stamps it (run.account)
		}
		if err != nil {
			lastErr = generationFailure(err)
			entry.Status, entry.Error = typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED, lastErr.Error()
			lastErr.AccountAnswer(entry) // an answer cut off before any content was paid for
			spent.add("", entry)
			if ctx.Err() != nil {
				break
			}
			// As a run's inference does (seed 000 §3): the recovery stage decides, waiting out
			// the rate limits once every target of the cycle is limited.
			d, _ := s.recoveryDecision(ctx, "generation", lastErr, attempt, &recoveryv1.RecoveryState{
				Target: target, Targets: targets, MaxRetries: int32(maxRetries), RateLimited: limited,
				RejectedTargets: rejected, FallbackTarget: s.contract.GetFallbackTarget(), LastAttempt: attempt == last-1,
			})
			limited = nextCycle(limited, target, lastErr)
			if lastErr.TargetRefused() {
				rejected = append(rejected, target)
			}
			if st := d.GetStrategy(); st == recoveryv1.Strategy_STRATEGY_ABORT || st == recoveryv1.Strategy_STRATEGY_ASK_USER {
				break
			}
			if b := d.GetBackoffMs(); b > 0 {
				if !sleep(ctx, time.Duration(b)*time.Millisecond) {
					break
				}
				limited = nil // the wait ends the cycle
			}
			next = d.GetModifiedAction().GetTarget()
			if fb := s.contract.GetFallbackTarget(); fb != nil && proto.Equal(next, fb) {
				if s.fallbackMisfit(s.contract, messages, offered) != "" {
					break // as in a run's turn: the failure stands, not the fallback's refusal
				}
				last = attempt + 2 // the next attempt, the fallback's, is the last
			}
			continue
		}
		entry.Tokens, entry.StopReason, entry.ActualModel, entry.CostUsd = resp.GetUsage(), resp.GetStopReason(), resp.GetModel(), resp.GetCostUsd()
		spent.add("", entry)
		if resp.GetStopReason() == stopContentFilter || resp.GetContent() == "" && len(resp.GetToolCalls()) == 0 {
			// Seed 000: an empty answer counts as an attempt and is tried again; it is no
			// decision, and none of them leaves the canned failure message. Neither is an
			// answer the content filter stopped, whatever part of it was delivered (infer).
			lastErr = nil
			continue
		}
		if resp.GetStopReason() == stopLength && len(resp.GetToolCalls()) == 0 && attempt < last-1 {
			// Seed 000: a text answer cut off at the output token limit is incomplete, and is
			// asked for again with the ephemeral CutOffNotice, as a run's is (cutOffNotice);
			// the last attempt's is kept as it is.
			notice = &typev1.Message{Role: typev1.Role_ROLE_USER, Content: CutOffNotice}
			lastErr = nil
			continue
		}
		if len(resp.GetToolCalls()) > 0 && policy == typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN {
			// Seed 001: under tool_policy forbidden any tool call is a contract violation, which
			// ends a run with this message; no decision calls a tool, confirmed or not.
			return spent.on(respond(MessageToolPolicyViolation)), nil
		}
		if refused := refuseCalls(resp, offered); refused != nil {
			// As a run refuses them, the model is told why and asked again: the caller never
			// gets a call it cannot make. The larger request is fitted to the window again.
			refusals = append(refusals, refused...)
			lastErr = nil
			history := req.GetMessageHistory()
			messages, err = fitWindow(s.contract, system, history, user, refusals, offered)
			if err != nil {
				break // not even the latest refusal fits: the model cannot be asked again
			}
			continue
		}
		return spent.on(decisionFor(resp, offered)), nil
	}
	_, _, message := providerExit(lastErr)
	return spent.on(respond(message)), nil
}

// fitWindow returns a decision's request: the system message, as much of history as fits,
// newest first, the message and after (the refused answers of earlier attempts, each followed
// by its refusals), so that with the offered tools it fits the contract's context window after
// its buffer and max output, as a run's context assembly does (a provider refuses a request
// over the window, and every target refused the whole history). A tool result whose call was
// left out is left out too. When after does not fit even without history, its oldest answers
// are left out, the latest kept, and a latest one that does not fit is an error. A message that
// does not fit even without history is INVALID_ARGUMENT naming message and the window. Without
// a window, all of history is kept.
func fitWindow(c *typev1.ExecutionContract, system *typev1.Message, history []*typev1.Message, message *typev1.Message,
	after []*typev1.Message, tools []*typev1.Tool) ([]*typev1.Message, error) {
	start := 0
	if window := c.GetContextWindow(); window > 0 {
		limit := window - c.GetContextWindowBufferTokens() - c.GetMaxOutputTokens()
		counter := tokens.ForModel(firstModel(c))
		room := limit - counter.Message(system) - counter.Message(message) - counter.Tools(tools)
		if room < 0 {
			return nil, stageerr.Invalid("message: %d tokens, with the system prompt and the offered tools, do not fit the "+
				"%d-token context window (buffer %d + max output %d tokens reserved), %d tokens too many",
				counter.Message(message), window, c.GetContextWindowBufferTokens(), c.GetMaxOutputTokens(), -room)
		}
		room -= counter.Messages(after)
		for room < 0 {
			n := 1 // the oldest refused answer and its refusals
			for n < len(after) && after[n].GetRole() == typev1.Role_ROLE_TOOL {
				n++
			}
			if n == len(after) {
				return nil, fmt.Errorf("the refused answer does not fit the %d-token context "+
					"window with the message, %d tokens too many", window, -room)
			}
			room += counter.Messages(after[:n])
			after = after[n:]
		}
		for start = len(history); start > 0; start-- {
			n := counter.Message(history[start-1])
			if n > room {
				break
			}
			room -= n
		}
		for start < len(history) && history[start].GetRole() == typev1.Role_ROLE_TOOL {
			start++
		}
	}
	messages := make([]*typev1.Message, 0, len(history)-start+2+len(after))
	messages = append(append(append(messages, system), history[start:]...), message)
	messages = append(messages, after...)
	return messages, nil
}

// refuseCalls returns, when the model called a tool it was not offered or with arguments that
// are not JSON, its answer and a tool message for each call, the refused ones saying why as a
// run's refusal does (validateCalls); nil when every call may be decided on.
func refuseCalls(resp *generationv1.GenerateResponse, offered []*typev1.Tool) []*typev1.Message {
	calls := resp.GetToolCalls()
	whys := make([]string, len(calls))
	refused := false
	for i, call := range calls {
		switch {
		case !slices.ContainsFunc(offered, func(t *typev1.Tool) bool { return t.GetName() == call.GetName() }):
			whys[i] = unknownTool(call.GetName(), offered)
		case call.GetArguments() == nil:
			whys[i] = invalidJSON(call.GetRawArguments())
		default:
			continue
		}
		refused = true
	}
	if !refused {
		return nil
	}
	out := []*typev1.Message{{
		Role: typev1.Role_ROLE_ASSISTANT, Content: resp.GetContent(), ToolCalls: calls,
		Reasoning: resp.GetReasoning(), ReasoningState: resp.GetReasoningState(),
	}}
	for i, call := range calls {
		content := "(tool failed: " + cmp.Or(whys[i], "not run: another call of the answer was refused") + ")"
		out = append(out, &typev1.Message{Role: typev1.Role_ROLE_TOOL, Content: content, ToolCallId: call.GetId(), Name: call.GetName()})
	}
	return out
}

// decideAccount is the accounting of a Decide: every LLM request it made (the intent model's
// and the generation attempts), as a run accounts them.
type decideAccount struct {
	entries []*typev1.AccountingEntry
}

// add takes requests a stage made (none: the decision's own inference) into the accounting.
func (a *decideAccount) add(stage string, entries ...*typev1.AccountingEntry) {
	for _, e := range entries {
		e.Stage = stage
		a.entries = append(a.entries, e)
	}
}

// on is d with the accounting and its tokens.
func (a *decideAccount) on(d *typev1.AgentDecision) *typev1.AgentDecision {
	d.Accounting, d.Usage = a.entries, &typev1.TokenUsage{}
	for _, e := range a.entries {
		addTokens(d.Usage, e.GetTokens())
	}
	return d
}

func respond(text string) *typev1.AgentDecision {
	return &typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY, ResponseText: text}
}

// decisionFor maps a model answer to a decision (seed 004's decision mapping).
func decisionFor(resp *generationv1.GenerateResponse, tools []*typev1.Tool) *typev1.AgentDecision {
	calls := resp.GetToolCalls()
	if len(calls) == 0 {
		return respond(resp.GetContent())
	}
	needsApproval := slices.ContainsFunc(calls, func(c *typev1.ToolCall) bool {
		return slices.ContainsFunc(tools, func(t *typev1.Tool) bool { return t.GetName() == c.GetName() && t.GetRequiresApproval() })
	})
	if needsApproval {
		return &typev1.AgentDecision{
			DecisionType:  typev1.DecisionType_DECISION_TYPE_REQUEST_CONFIRMATION,
			ToolCalls:     calls,
			ResponseText:  resp.GetContent(),
			PendingAction: &typev1.PendingAction{ToolCalls: calls, Reason: "a requested tool needs your confirmation"},
		}
	}
	return &typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_INVOKE_TOOL, ToolCalls: calls, ResponseText: resp.GetContent()}
}

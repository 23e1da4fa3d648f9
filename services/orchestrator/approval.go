package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// approvalState is a pause: tool calls waiting for a person (seed 003 Human-in-Loop).
type approvalState struct {
	pending   *typev1.PendingAction
	decisions map[string]*agentv1.ResolveApprovalRequest // call id → decision
	resolved  chan struct{}                              // closed when every call is decided
}

func (a *approvalState) undecided() []string {
	var ids []string
	for _, c := range a.pending.GetToolCalls() {
		if _, ok := a.decisions[c.GetId()]; !ok {
			ids = append(ids, c.GetId())
		}
	}
	return ids
}

// requiresApproval reports whether a tool may run only with a recorded approval.
func (r *run) requiresApproval(name string) bool {
	return slices.ContainsFunc(r.available, func(t *typev1.Tool) bool { return t.GetName() == name && t.GetRequiresApproval() })
}

// awaitApproval pauses the run until every call that needs approval is decided, the approval
// timeout passes (a rejection: the run ends REJECTED / APPROVAL_TIMEOUT) or the run is
// cancelled. Decisions are applied to plan: approved calls run with the recorded approval,
// modified calls with the new arguments (validated again by the action stage), rejected calls
// are answered to the model as tool failures.
func (r *run) awaitApproval(ctx context.Context, plan []plannedCall) *ending {
	var calls []*typev1.ToolCall
	for _, p := range plan {
		if p.refusal == "" && p.needsApproval {
			calls = append(calls, p.call)
		}
	}
	now := r.svc.now()
	timeout := time.Duration(r.contract.GetApprovalTimeoutMs()) * time.Millisecond
	st := &approvalState{
		pending: &typev1.PendingAction{
			RunId: r.id, ToolCalls: calls, RequestedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(timeout)),
			Reason: "these tool calls write, delete, run commands or spend money, and need your approval",
		},
		decisions: map[string]*agentv1.ResolveApprovalRequest{},
		resolved:  make(chan struct{}),
	}
	st0 := typev1.RunState_RUN_STATE_AWAIT_APPROVAL
	r.step(ctx, st0, r.stepID(st0), func(context.Context) (proto.Message, proto.Message, string) {
		return st.pending, nil, fmt.Sprintf("waiting for approval of %d call(s): %s", len(calls), strings.Join(callNames(calls), ", "))
	})
	r.decision = &typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_REQUEST_CONFIRMATION, ToolCalls: calls, PendingAction: st.pending}
	r.mu.Lock()
	r.approval = st
	r.mu.Unlock()
	r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_ApprovalRequested{ApprovalRequested: &eventv1.ApprovalRequested{PendingAction: st.pending}}})
	r.publish(r.pausedResult(st.pending))

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var end *ending
	select {
	case <-st.resolved:
	case <-ctx.Done():
	case <-timer.C:
		r.mu.Lock()
		undecided := st.undecided()
		for _, id := range undecided {
			st.decisions[id] = nil // nil: timed out
		}
		r.mu.Unlock()
		for _, id := range undecided {
			r.recordDecision(ctx, id, "timeout", nil, "")
		}
		end = fail(typev1.Outcome_OUTCOME_REJECTED, ExitApprovalTimeout, "Nobody approved the requested action in time, so it was not carried out.",
			fmt.Sprintf("no decision within approval_timeout_ms (%d ms) for %s", r.contract.GetApprovalTimeoutMs(), strings.Join(undecided, ", ")))
	}
	r.mu.Lock()
	r.approval = nil
	decisions := st.decisions
	r.mu.Unlock()
	r.publish(nil)
	r.applyDecisions(plan, decisions, end != nil)
	return end
}

// applyDecisions turns recorded decisions into what EXECUTE does with each call.
func (r *run) applyDecisions(plan []plannedCall, decisions map[string]*agentv1.ResolveApprovalRequest, timedOut bool) {
	for i := range plan {
		p := &plan[i]
		if p.refusal != "" {
			continue
		}
		d, decided := decisions[p.call.GetId()]
		switch {
		case !p.needsApproval && timedOut:
			p.refusal = "(tool failed: not run: the run ended waiting for approval)"
		case !p.needsApproval:
		case !decided:
			p.refusal = "(tool failed: interrupted while waiting for approval)"
		case d == nil:
			p.refusal = "(tool failed: approval timed out)"
		case d.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT:
			p.refusal = "(tool failed: rejected by the user" + feedbackSuffix(d.GetFeedback()) + ")"
		case d.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY:
			modified := proto.CloneOf(p.call)
			modified.Arguments = d.GetModifiedArguments()
			b, _ := protojson.Marshal(d.GetModifiedArguments())
			modified.RawArguments = string(b)
			p.call = modified
			p.note = "[arguments modified by the user: " + string(b) + "]\n"
			p.approval = &actionv1.Approval{Approved: true, Approver: r.userID, Feedback: d.GetFeedback()}
		default:
			p.approval = &actionv1.Approval{Approved: true, Approver: r.userID, Feedback: d.GetFeedback()}
		}
	}
}

func feedbackSuffix(feedback string) string {
	if feedback == "" {
		return ""
	}
	return ": " + feedback
}

func callNames(calls []*typev1.ToolCall) []string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.GetName() + " (" + c.GetId() + ")"
	}
	return names
}

// recordDecision writes a decision to the transcript and announces it.
func (r *run) recordDecision(ctx context.Context, callID, decision string, args *structpb.Struct, feedback string) {
	ev := &eventv1.ApprovalResolved{CallId: callID, Decision: decision, Feedback: feedback, Arguments: args}
	st := typev1.RunState_RUN_STATE_AWAIT_APPROVAL
	r.step(ctx, st, r.stepID(st)+"/"+callID, func(context.Context) (proto.Message, proto.Message, string) {
		return nil, ev, decision + " " + callID + feedbackSuffix(feedback)
	})
	r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_ApprovalResolved{ApprovalResolved: ev}})
}

// resolve records one decision of a person; the run resumes when the last call is decided.
func (r *run) resolve(ctx context.Context, req *agentv1.ResolveApprovalRequest) (*agentv1.ResolveApprovalResponse, error) {
	r.mu.Lock()
	st := r.approval
	if st == nil {
		r.mu.Unlock()
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q has no tool call waiting for approval", r.id)
	}
	if !slices.ContainsFunc(st.pending.GetToolCalls(), func(c *typev1.ToolCall) bool { return c.GetId() == req.GetCallId() }) {
		r.mu.Unlock()
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND,
			"run %q has no tool call %q waiting for approval; waiting: %s", r.id, req.GetCallId(), strings.Join(st.undecided(), ", "))
	}
	if _, done := st.decisions[req.GetCallId()]; done {
		r.mu.Unlock()
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, "tool call %q of run %q is already decided", req.GetCallId(), r.id)
	}
	st.decisions[req.GetCallId()] = req
	remaining := st.undecided()
	r.mu.Unlock()
	// Record before resuming, so the decision precedes the executions in transcript and events.
	decision := strings.ToLower(strings.TrimPrefix(req.GetDecision().String(), "APPROVAL_DECISION_"))
	r.recordDecision(trace.ContextWithSpan(context.WithoutCancel(ctx), r.span), req.GetCallId(), decision, req.GetModifiedArguments(), req.GetFeedback())
	if len(remaining) == 0 {
		close(st.resolved)
	}
	return &agentv1.ResolveApprovalResponse{RunId: r.id, CallId: req.GetCallId(), PendingCallIds: remaining, Resumed: len(remaining) == 0}, nil
}

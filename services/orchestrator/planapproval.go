package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// PlanCallID is the call id of the pseudo tool call that stands for a run's plan while the run
// waits for its approval: ResolveApproval with call_id "plan" approves or rejects the plan.
const PlanCallID = "plan"

// messagePlanRejected is the final report of a run whose plan a person rejected, with a
// rejection that ends the run.
const messagePlanRejected = "The plan was rejected, so nothing more was carried out and the run stopped."

// approvePlan pauses the run, before its next turn, when its plan requires human approval
// and tools.approve_plans asks for it (seed 003 Human-in-Loop). It is the pause of tool calls
// (AWAIT_APPROVAL entries, approval_requested and approval_resolved events, a paused result,
// checkpointed, resumable on any replica), for the one pseudo call "plan", whose arguments
// are the plan's steps. An approval goes on with the plan. A rejection that ends runs
// (end_run, or tools.reject_ends_run) ends this one REJECTED / USER_REJECTED; another
// rejection drops the plan, and the run goes on without one. No decision within
// approval_timeout_ms ends the run REJECTED / APPROVAL_TIMEOUT. Either way a tool that
// requires approval still waits for its own call's approval. A run restored from the pause
// (r.approval set) goes on waiting.
func (r *run) approvePlan(ctx context.Context, requires bool) *ending {
	r.mu.Lock()
	st := r.approval
	r.mu.Unlock()
	if st == nil {
		if !requires || !r.svc.planning.ApprovePlans || r.tracker == nil {
			return nil
		}
		st = r.pausePlan(ctx)
		if e := r.checkpoint(ctx, checkpointv1.Phase_PHASE_AWAITING_APPROVAL, nil, nil); e != nil {
			return e
		}
		r.publish(r.pausedResult(st.pending))
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_ApprovalRequested{ApprovalRequested: &eventv1.ApprovalRequested{PendingAction: st.pending}}})
		if e := r.yield(func(ctx context.Context) *ending { return r.approvePlan(ctx, true) }); e != nil {
			return e
		}
	} else {
		r.publish(r.pausedResult(st.pending))
	}
	end, stopped := r.waitDecisions(ctx, st, func() *ending { return r.checkpoint(ctx, checkpointv1.Phase_PHASE_AWAITING_APPROVAL, nil, nil) })
	if stopped {
		return end
	}
	r.mu.Lock()
	r.approval = nil
	d, decided := st.decisions[PlanCallID]
	r.mu.Unlock()
	if d != nil && r.svc.store != nil {
		// A revised plan pauses for "plan" again, and waits for a decision of its own. A
		// pause closed undecided (d nil) ends the run: its closing record stays, so that a
		// decision after it is refused until the run has stored its ending.
		if err := r.svc.store.ForgetDecision(ctx, r.id, PlanCallID); err != nil {
			r.svc.log.WarnContext(ctx, "forgetting the plan's decision failed; a revised plan cannot be decided",
				"run_id", r.id, "err", err)
		}
	}
	r.publish(nil)
	r.decision = nil // the plan's confirmation is not the run's decision
	switch {
	case end != nil:
		return end
	case !decided:
		return r.interruption(ctx)
	case d.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE:
		return nil
	case endsRun(r.contract, d):
		message, reason := messagePlanRejected, "the plan was rejected, and the rejection ends the run"
		if fb := d.GetFeedback(); fb != "" {
			message += fmt.Sprintf(" The reason given: %q.", fb)
			reason += ": " + fb
		}
		return fail(typev1.Outcome_OUTCOME_REJECTED, ExitUserRejected, message, reason)
	}
	r.tracker = nil
	st0 := typev1.RunState_RUN_STATE_PLAN
	r.step(ctx, st0, r.stepID(st0)+"/rejected", func(context.Context) (proto.Message, proto.Message, string) {
		return nil, nil, "the plan was rejected" + feedbackSuffix(d.GetFeedback()) + "; the run goes on without a plan"
	})
	return nil
}

// pausePlan starts waiting for approval of the plan: AWAIT_APPROVAL in the transcript and the
// REQUEST_CONFIRMATION decision.
func (r *run) pausePlan(ctx context.Context) *approvalState {
	call := planCall(r.tracker.plan())
	now := r.svc.now()
	st := &approvalState{
		pending: &typev1.PendingAction{
			RunId: r.id, ToolCalls: []*typev1.ToolCall{call}, RequestedAt: timestamppb.New(now),
			ExpiresAt: r.pauseExpiry(now, time.Duration(r.contract.GetApprovalTimeoutMs())*time.Millisecond),
			Reason:    "the plan has steps that write, delete, run commands, send or spend money: approve or reject the plan (call_id \"" + PlanCallID + "\")",
		},
		decisions: map[string]*agentv1.ResolveApprovalRequest{},
		resolved:  make(chan struct{}),
	}
	st0 := typev1.RunState_RUN_STATE_AWAIT_APPROVAL
	r.step(ctx, st0, r.stepID(st0), func(context.Context) (proto.Message, proto.Message, string) {
		return st.pending, nil, fmt.Sprintf("waiting for approval of the plan: %d step(s), call_id %q", len(r.tracker.steps), PlanCallID)
	})
	r.decision = &typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_REQUEST_CONFIRMATION, ToolCalls: st.pending.GetToolCalls(), PendingAction: st.pending}
	r.mu.Lock()
	r.approval = st
	r.mu.Unlock()
	return st
}

// planCall is the pseudo tool call "plan" whose arguments are the plan's steps.
func planCall(steps []*typev1.Step) *typev1.ToolCall {
	list := make([]any, len(steps))
	for i, st := range steps {
		deps := make([]any, len(st.GetDependsOn()))
		for j, d := range st.GetDependsOn() {
			deps[j] = d
		}
		list[i] = map[string]any{"id": st.GetId(), "description": st.GetDescription(), "tool": st.GetToolName(), "depends_on": deps}
	}
	args, _ := structpb.NewStruct(map[string]any{"steps": list}) // strings, lists and maps only: it cannot fail
	return &typev1.ToolCall{Id: PlanCallID, Name: PlanCallID, Arguments: args}
}

// isPlanPause reports whether a pause waits for the approval of the plan.
func isPlanPause(pending *typev1.PendingAction) bool {
	calls := pending.GetToolCalls()
	return len(calls) == 1 && calls[0].GetId() == PlanCallID && calls[0].GetName() == PlanCallID
}

// planDecisionError refuses a decision that modifies a plan: a plan is approved or rejected.
func planDecisionError(pending *typev1.PendingAction, req *agentv1.ResolveApprovalRequest) error {
	if isPlanPause(pending) && req.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY {
		return stageerr.Invalid("decision: the plan (call_id %q) is approved or rejected, not modified", PlanCallID)
	}
	return nil
}

// modifiedArgumentsError is the INVALID_ARGUMENT error of a decision to modify a paused call
// with arguments its tool's input schema refuses, nil otherwise; tools are the run's offered
// tools. The approver is told at once, and decides again: accepted, the arguments failed only
// when the call ran, as a tool failure the model saw. A tool without a schema the orchestrator
// can compile is left to the action stage, which checks the arguments again anyway.
func modifiedArgumentsError(pending *typev1.PendingAction, tools []*typev1.Tool, req *agentv1.ResolveApprovalRequest) error {
	if req.GetDecision() != agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY {
		return nil
	}
	calls := pending.GetToolCalls()
	i := slices.IndexFunc(calls, func(c *typev1.ToolCall) bool { return c.GetId() == req.GetCallId() })
	if i < 0 {
		return nil // not paused: the caller says so
	}
	name := calls[i].GetName()
	j := slices.IndexFunc(tools, func(t *typev1.Tool) bool { return t.GetName() == name })
	if j < 0 || tools[j].GetInputSchema() == nil {
		return nil
	}
	sch, err := schema.Compile("tool:///"+name+".arguments.json", tools[j].GetInputSchema().AsMap())
	if err != nil {
		return nil
	}
	if err := sch.Validate(req.GetModifiedArguments().AsMap()); err != nil {
		return stageerr.Invalid("modified_arguments do not match the input schema of tool %s: %s", name, schema.Message(err))
	}
	return nil
}

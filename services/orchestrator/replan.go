package orchestrator

import (
	"context"
	"fmt"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/proto"
)

// PlanningOptions say how runs use their plans.
type PlanningOptions struct {
	// MaxSteps is the step limit of a plan (defaults.max_plan_steps); 0 leaves the planning
	// stage's default, 20.
	MaxSteps int32
	// MaxReplans bounds the revisions of a run's plan (defaults.max_replans); 0 never revises.
	MaxReplans int32
	// ApprovePlans makes a run whose plan requires human approval wait for a person to approve
	// the plan before its first turn (tools.approve_plans).
	ApprovePlans bool
}

// stagePlanning names the planning stage in accounting entries.
const stagePlanning = "planning"

// planRequest is the request of the run's plan, or of its revision.
func (r *run) planRequest(revision *planningv1.PlanRevision) *planningv1.PlanRequest {
	return &planningv1.PlanRequest{
		Goal: r.goal, AvailableTools: r.offered, Constraints: r.constraints, TaskType: r.taskType,
		MaxSteps: r.svc.planning.MaxSteps, RunId: r.id, Revision: revision,
	}
}

// askPlanning calls the planning stage and accounts the planning model's request, which a
// failure carries too. A plan outside the planning contract is a *contractViolation. The call
// is bounded by modelStageWait: the stage may ask a model first. The model's tokens count
// toward the run's usage.
func (r *run) askPlanning(ctx context.Context, req *planningv1.PlanRequest) (*planningv1.PlanResponse, error) {
	resp, err := whenReadyWithin(ctx, "planning", r.modelStageWait(), r.svc.peers.Planning.Plan, req)
	entries := resp.GetAccounting()
	if err != nil {
		entries = stageerr.FromError(err).Accounting
	}
	for _, e := range entries {
		e.Stage = stagePlanning
		r.account(e)
		if e.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_LLM {
			r.addUsage(e.GetTokens())
		}
	}
	if err == nil {
		if v := checkPlan(req, resp); v != nil {
			return nil, v
		}
	}
	return resp, err
}

// planDetail is the transcript detail of a plan: what it is, who made it, and what to know.
func planDetail(what string, resp *planningv1.PlanResponse, c *typev1.ExecutionContract) string {
	detail := what + " by the " + resp.GetSource()
	if fb := resp.GetFallbackReason(); fb != "" {
		detail += " (the planning model's plan is not used: " + fb + ")"
	}
	detail += fmt.Sprintf(", estimated %d turns", resp.GetEstimatedSteps())
	if resp.GetEstimatedSteps() > c.GetMaxTurns() {
		detail += fmt.Sprintf(", more than max_turns (%d)", c.GetMaxTurns())
	}
	if resp.GetRequiresHumanApproval() {
		detail += "; requires human approval"
	}
	return detail
}

// revisePlan revises the plan between turns when a revision is due (a step failed beyond
// recovery, or the model's calls left the plan) and the next turn is not a final one (seed
// 003: Error/Recovery → Planning): the planning stage gets the plan with each step's state and
// the reason; the revised plan keeps the steps that are done, and is announced as plan_revised.
// Each time, a PLAN entry in the transcript says what happened: a revision, or why the plan
// stays as it is (defaults.max_replans revisions were made, or the planning stage could not
// revise it). A revised plan that requires human approval waits for it like the first one.
func (r *run) revisePlan(ctx context.Context) *ending {
	why := r.tracker.reason()
	if why == "" || r.finalReason() != "" || r.turns >= r.contract.GetMaxTurns()-1 {
		return nil
	}
	r.tracker.revise = nil
	var resp *planningv1.PlanResponse
	st := typev1.RunState_RUN_STATE_PLAN
	r.step(ctx, st, r.stepID(st), func(ctx context.Context) (proto.Message, proto.Message, string) {
		if limit := r.svc.planning.MaxReplans; r.tracker.revisions >= limit {
			return nil, nil, fmt.Sprintf("not revised: %s; the plan was revised %d times, the limit (defaults.max_replans) is %d", why, r.tracker.revisions, limit)
		}
		req := r.planRequest(&planningv1.PlanRevision{Steps: r.tracker.progress(), Reason: why})
		var err error
		if resp, err = r.askPlanning(ctx, req); err != nil {
			resp = nil
			return req, nil, fmt.Sprintf("not revised: %s; the planning stage failed: %s", why, stageerr.FromError(err).Error())
		}
		r.tracker.revisions++
		r.tracker.take(resp.GetSteps())
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_PlanRevised{PlanRevised: &eventv1.PlanRevised{
			Revision: r.tracker.revisions, Reason: why, Steps: r.tracker.progress(), RequiresHumanApproval: resp.GetRequiresHumanApproval(),
			Source: resp.GetSource(), FallbackReason: resp.GetFallbackReason(), EstimatedSteps: resp.GetEstimatedSteps(),
		}}})
		return req, resp, planDetail(fmt.Sprintf("revision %d (%s): %d steps", r.tracker.revisions, why, len(resp.GetSteps())), resp, r.contract)
	})
	if resp == nil {
		return nil
	}
	return r.approvePlan(ctx, resp.GetRequiresHumanApproval())
}

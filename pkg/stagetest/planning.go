package stagetest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"google.golang.org/grpc/codes"
)

// offeredTools are the tools the planning cases offer.
var offeredTools = []*typev1.Tool{
	{Name: "calculator", Description: "Evaluates an arithmetic expression exactly as written and returns the number."},
	{Name: "current_time", Description: "Returns the current date and time."},
}

// deleteFile is a tool that requires approval.
var deleteFile = &typev1.Tool{Name: "delete_file", Description: "Deletes a file.", RequiresApproval: true}

var planningCases = []testCase{
	{"plan-keeps-contract", "a plan for an action goal has steps with unique ids, known dependencies, only offered tools, no cycle, executable order, at most max_steps",
		func(ctx context.Context, k *kit) error {
			req := &planningv1.PlanRequest{Goal: "Calculate 6 times 7, then tell me the current time", TaskType: "action",
				AvailableTools: offeredTools, MaxSteps: 5, RunId: k.id("run")}
			resp, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, req)
			if err != nil {
				return wantOK(err)
			}
			return checkPlan(resp, offeredTools, 5)
		}},
	{"question-without-tools", "a question with no tools offered is planned (reasoning steps only), not refused",
		func(ctx context.Context, k *kit) error {
			resp, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{
				Goal: "What is the capital of France?", TaskType: "question", RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			return checkPlan(resp, nil, plan.DefaultMaxSteps)
		}},
	{"no-tool-can-serve", "an action goal with no tool offered is NO_VIABLE_PLAN (FAILED_PRECONDITION)",
		func(ctx context.Context, k *kit) error {
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{
				Goal: "Delete the file report.txt", TaskType: "action", RunId: k.id("run")})
			return wantFailure(err, codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN)
		}},
	{"proposed-plan-ordered", "proposed steps listed out of order come back in executable order, the same steps",
		func(ctx context.Context, k *kit) error {
			proposed := []*typev1.Step{
				{Id: "b", Description: "multiply", ToolName: "calculator", DependsOn: []string{"a"}},
				{Id: "a", Description: "read the clock", ToolName: "current_time"},
			}
			resp, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{
				Goal: "g", AvailableTools: offeredTools, ProposedSteps: proposed, RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			if err := checkPlan(resp, offeredTools, plan.DefaultMaxSteps); err != nil {
				return err
			}
			if ids := stepIDs(resp.GetSteps()); !slices.Equal(ids, []string{"a", "b"}) {
				return fmt.Errorf("steps %v, want [a b]", ids)
			}
			return nil
		}},
	{"cyclic-proposed-plan", "proposed steps with a dependency cycle are NO_VIABLE_PLAN (FAILED_PRECONDITION)",
		proposedFailure([]*typev1.Step{{Id: "a", DependsOn: []string{"b"}}, {Id: "b", DependsOn: []string{"a"}}}, 0,
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN)},
	{"unoffered-tool", "proposed steps using a tool that is not offered are NO_VIABLE_PLAN (FAILED_PRECONDITION)",
		proposedFailure([]*typev1.Step{{Id: "a", ToolName: "rm_everything"}}, 0,
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN)},
	{"over-max-steps", "3 proposed steps with max_steps 2 are PLAN_TOO_COMPLEX (RESOURCE_EXHAUSTED)",
		proposedFailure(Chain(3), 2, codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX)},
	{"default-max-steps", "max_steps 0 means 20: 21 proposed steps are PLAN_TOO_COMPLEX (RESOURCE_EXHAUSTED)",
		proposedFailure(Chain(21), 0, codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX)},
	{"duplicate-step-id", `proposed steps with a repeated id ("twice") are INVALID_ARGUMENT naming the id`,
		proposedFailure([]*typev1.Step{{Id: "twice"}, {Id: "twice"}}, 0, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "twice")},
	{"unknown-dependency", "a proposed step depending on an unknown step is INVALID_ARGUMENT naming it",
		proposedFailure([]*typev1.Step{{Id: "a", DependsOn: []string{"zz"}}}, 0, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "zz")},
	{"approval-tool", "a plan with a step whose tool requires approval sets requires_human_approval",
		func(ctx context.Context, k *kit) error {
			tools := append(slices.Clone(offeredTools), deleteFile)
			resp, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{
				Goal: "g", AvailableTools: tools, ProposedSteps: []*typev1.Step{{Id: "a", ToolName: "delete_file"}}, RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			if !resp.GetRequiresHumanApproval() {
				return fmt.Errorf("requires_human_approval is false, want true: step a uses delete_file, which requires approval")
			}
			return nil
		}},
	{"revision-keeps-done", "a revision keeps every step that is done as it was (id, description, tool), in a plan that keeps the contract",
		func(ctx context.Context, k *kit) error {
			rev := &planningv1.PlanRevision{Reason: "the calculator failed", Steps: []*typev1.StepProgress{
				{Step: &typev1.Step{Id: "a", Description: "read the clock", ToolName: "current_time"}, State: typev1.StepState_STEP_STATE_DONE},
				{Step: &typev1.Step{Id: "b", Description: "multiply 6 by 7", ToolName: "calculator", DependsOn: []string{"a"}}, State: typev1.StepState_STEP_STATE_FAILED},
			}}
			resp, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{
				Goal: "Read the clock, then calculate 6 times 7", TaskType: "action", AvailableTools: offeredTools,
				MaxSteps: 5, RunId: k.id("run"), Revision: rev})
			if err != nil {
				return wantOK(err)
			}
			if err := checkPlan(resp, offeredTools, 5); err != nil {
				return err
			}
			return plan.KeepsDone(resp.GetSteps(), rev.GetSteps())
		}},
	{"empty-goal", "an empty goal is INVALID_ARGUMENT naming goal",
		func(ctx context.Context, k *kit) error {
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{Goal: " ", AvailableTools: offeredTools})
			return wantInvalid(err, "goal")
		}},
	{"run-id-over-limit", "a run_id of 129 bytes is INVALID_ARGUMENT naming run_id",
		func(ctx context.Context, k *kit) error {
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{Goal: "g", RunId: strings.Repeat("r", 129)})
			return wantInvalid(err, "run_id")
		}},
	{"negative-max-steps", "a negative max_steps is INVALID_ARGUMENT naming max_steps",
		func(ctx context.Context, k *kit) error {
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{Goal: "g", MaxSteps: -1})
			return wantInvalid(err, "max_steps")
		}},
	{"max-steps-over-limit", "a max_steps of 1001 is INVALID_ARGUMENT naming max_steps",
		func(ctx context.Context, k *kit) error {
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx,
				&planningv1.PlanRequest{Goal: "g", MaxSteps: plan.MaxStepsLimit + 1, RunId: k.id("run")})
			return wantInvalid(err, "max_steps")
		}},
	{"constraints-over-limit", "1001 constraints are INVALID_ARGUMENT naming constraints",
		func(ctx context.Context, k *kit) error {
			cs := make([]string, 1001)
			for i := range cs {
				cs[i] = fmt.Sprint("in under ", i+1, " words")
			}
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx,
				&planningv1.PlanRequest{Goal: "g", Constraints: cs, RunId: k.id("run")})
			return wantInvalid(err, "constraints")
		}},
	{"step-id-over-limit",
		"a proposed step's id of 257 bytes is INVALID_ARGUMENT naming proposed_steps",
		func(ctx context.Context, k *kit) error {
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{
				Goal: "g", ProposedSteps: []*typev1.Step{{Id: strings.Repeat("s", 257)}}, RunId: k.id("run")})
			return wantInvalid(err, "proposed_steps")
		}},
	{"tools-over-limit", "1001 available tools are INVALID_ARGUMENT naming available_tools",
		func(ctx context.Context, k *kit) error {
			tools := make([]*typev1.Tool, 1001)
			for i := range tools {
				tools[i] = &typev1.Tool{Name: fmt.Sprint("tool_", i+1)}
			}
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx,
				&planningv1.PlanRequest{Goal: "g", AvailableTools: tools, RunId: k.id("run")})
			return wantInvalid(err, "available_tools")
		}},
	{"revision-reason-over-limit", "a revision whose reason has 65537 bytes is INVALID_ARGUMENT naming revision.reason",
		func(ctx context.Context, k *kit) error {
			rev := &planningv1.PlanRevision{Reason: strings.Repeat("r", 64<<10+1), Steps: []*typev1.StepProgress{
				{Step: &typev1.Step{Id: "a", Description: "read the clock", ToolName: "current_time"},
					State: typev1.StepState_STEP_STATE_FAILED}}}
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{
				Goal: "g", AvailableTools: offeredTools, Revision: rev, RunId: k.id("run")})
			return wantInvalid(err, "revision.reason")
		}},
	{"tool-offered-twice", "a tool listed twice in available_tools is INVALID_ARGUMENT naming available_tools",
		func(ctx context.Context, k *kit) error {
			_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{Goal: "g",
				AvailableTools: []*typev1.Tool{offeredTools[0], offeredTools[0]}})
			return wantInvalid(err, "available_tools")
		}},
}

// proposedFailure is a case whose proposed steps the contract refuses with the given failure.
func proposedFailure(steps []*typev1.Step, maxSteps int32, c codes.Code, sc typev1.StageErrorCode, names ...string) func(context.Context, *kit) error {
	return func(ctx context.Context, k *kit) error {
		_, err := planningv1.NewPlanningServiceClient(k.conn).Plan(ctx, &planningv1.PlanRequest{
			Goal: "g", AvailableTools: offeredTools, MaxSteps: maxSteps, ProposedSteps: steps, RunId: k.id("run")})
		return wantFailure(err, c, sc, names...)
	}
}

// checkPlan returns how a plan breaks the planning contract for the offered tools and limit.
// A plan without steps keeps it: Plan promises at most max_steps steps, none at least, and the
// orchestrator runs such a plan (the model works without one).
func checkPlan(resp *planningv1.PlanResponse, offered []*typev1.Tool, limit int) error {
	steps := resp.GetSteps()
	if err := plan.Check(steps, plan.Tools(offered), limit); err != nil {
		return fmt.Errorf("the plan breaks the contract: %v", err)
	}
	if err := plan.Ordered(steps); err != nil {
		return fmt.Errorf("the plan is not in executable order: %v", err)
	}
	if resp.GetEstimatedSteps() < 0 {
		return fmt.Errorf("estimated_steps is %d, want at least 0", resp.GetEstimatedSteps())
	}
	return nil
}

// Chain is n plan steps s1…sn without tools, each depending on the one before: a plan in
// executable order, as long as a test needs (the kit's over-max_steps case, or a replacement
// planning stage's answer in a mesh test).
func Chain(n int) []*typev1.Step {
	steps := make([]*typev1.Step, n)
	for i := range steps {
		steps[i] = &typev1.Step{Id: fmt.Sprintf("s%d", i+1)}
		if i > 0 {
			steps[i].DependsOn = []string{steps[i-1].GetId()}
		}
	}
	return steps
}

func stepIDs(steps []*typev1.Step) []string {
	ids := make([]string, len(steps))
	for i, st := range steps {
		ids[i] = st.GetId()
	}
	return ids
}

package orchestrator

import (
	"fmt"
	"strings"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
)

// contractViolation is a stage's answer that breaks the stage's contract. Any stage can be
// replaced (DESIGN §8), so the run checks what it relies on instead of trusting it, and does not
// use such an answer: a run that gets one before its first turn ends STAGE_CONTRACT_VIOLATION.
type contractViolation struct {
	stage string // "planning", "intent"
	why   string // the rule broken
}

// Error says which stage broke which rule.
func (v *contractViolation) Error() string {
	return "the " + v.stage + " stage answered outside its contract: " + v.why
}

// ending ends a run on the violation, before any turn; retrying cannot help.
func (v *contractViolation) ending() *ending {
	return fail(typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, ExitStageContractViolation, MessageProviderFailure, v.Error())
}

// checkPlan returns how a planning stage's answer to req breaks the planning contract (the
// rules of pkg/plan, which the planning stage applies to the plans it makes, with the tools the
// request offered and its max_steps, and the executable order of the steps), or nil.
func checkPlan(req *planningv1.PlanRequest, resp *planningv1.PlanResponse) *contractViolation {
	limit := int(req.GetMaxSteps())
	if limit == 0 {
		limit = plan.DefaultMaxSteps
	}
	err := plan.Check(resp.GetSteps(), plan.Tools(req.GetAvailableTools()), limit)
	if err == nil {
		err = plan.Ordered(resp.GetSteps())
	}
	if err != nil {
		return &contractViolation{stage: stagePlanning, why: err.Error()}
	}
	return nil
}

// checkIntent returns how an intent stage's answer breaks the intent contract (a goal, always;
// a task type and a tool policy the run knows), or nil.
func checkIntent(resp *intentv1.ParseResponse) *contractViolation {
	why := ""
	switch {
	case strings.TrimSpace(resp.GetGoal()) == "":
		why = "the goal is empty"
	case intentv1.TaskType_name[int32(resp.GetTaskType())] == "":
		why = fmt.Sprintf("task_type %d is not a TaskType", resp.GetTaskType())
	case typev1.ToolPolicy_name[int32(resp.GetToolPolicy())] == "":
		why = fmt.Sprintf("tool_policy %d is not a ToolPolicy", resp.GetToolPolicy())
	default:
		return nil
	}
	return &contractViolation{stage: "intent", why: why}
}

package assembly

import (
	"fmt"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
)

// stepMessage returns the system message that shows the model where the plan stands, and its
// source, or nil when there is neither a current step nor a plan. It opens with "Current step
// <id>: <description> (tool: <tool>)"; without a current step, it says that every step is done,
// or, when one failed, that not every step is done. A plan of more than one step, or whose step
// is no longer pending, follows with its progress, a line a step:
// "- step-2 [failed: division by zero]: Add the numbers (tool: calculator)", with the
// structured result of a done step after it as JSON: "... (tool: weather) → {"sky":"clear"}".
func stepMessage(step *typev1.Step, progress []*typev1.StepProgress) (*typev1.Message, *typev1.Source) {
	if step == nil && len(progress) == 0 {
		return nil, nil
	}
	var b strings.Builder
	source := &typev1.Source{Kind: "plan", Id: "plan", Title: "the plan's progress"}
	done := 0
	for _, p := range progress {
		if p.GetState() == typev1.StepState_STEP_STATE_DONE {
			done++
		}
	}
	switch {
	case step != nil:
		b.WriteString("Current step " + step.GetId() + ": " + describe(step))
		source.Id, source.Title = step.GetId(), step.GetDescription()
	case done == len(progress):
		b.WriteString("Every step of the plan is done.")
	default: // a failed step is not done
		b.WriteString("No step of the plan is current, and not every step is done.")
	}
	if len(progress) > 1 || len(progress) == 1 && progress[0].GetState() != typev1.StepState_STEP_STATE_PENDING {
		fmt.Fprintf(&b, "\nPlan progress: %d of %d steps done.", done, len(progress))
		for _, p := range progress {
			b.WriteString("\n- " + p.GetStep().GetId() + " [" + stateLabel(p, step) + "]: " + describe(p.GetStep()))
			if out := plan.OutputJSON(p.GetOutput()); out != "" {
				b.WriteString(" → " + out)
			}
		}
	}
	return &typev1.Message{Role: typev1.Role_ROLE_SYSTEM, Content: b.String()}, source
}

// describe is a step's description with its tool.
func describe(step *typev1.Step) string {
	if step.GetToolName() == "" {
		return step.GetDescription()
	}
	return step.GetDescription() + " (tool: " + step.GetToolName() + ")"
}

// stateLabel is a step's state in the progress: "done", "current", "pending, after step-1",
// "failed: <what happened>".
func stateLabel(p *typev1.StepProgress, current *typev1.Step) string {
	switch p.GetState() {
	case typev1.StepState_STEP_STATE_DONE:
		return "done"
	case typev1.StepState_STEP_STATE_FAILED:
		if p.GetNote() == "" {
			return "failed"
		}
		return "failed: " + p.GetNote()
	}
	if p.GetStep().GetId() == current.GetId() {
		return "current"
	}
	if deps := p.GetStep().GetDependsOn(); len(deps) > 0 {
		return "pending, after " + strings.Join(deps, ", ")
	}
	return "pending"
}

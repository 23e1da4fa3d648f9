package planning

import (
	"fmt"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/toolname"
)

// Limits of a request's fields (README "Limits"); max_steps is at most plan.MaxStepsLimit, a
// revision's reason, a revised step's note and output at most plan.MaxReasonBytes,
// plan.MaxNoteBytes and plan.MaxOutputBytes of JSON, a step's tool at most
// toolname.MaxRequestBytes and its description as long as the goal may be.
const (
	// MaxConstraints is the most constraints a request may give: the intent model gives at
	// most 32, its rules one per phrase of a message.
	MaxConstraints = 1000
	// MaxConstraintsBytes is the most bytes a request's constraints may have in all: twice
	// the intent stage's message, as the intent model's 32 constraints of 1,000 characters
	// may be.
	MaxConstraintsBytes = 128 << 10
	// MaxStepIDBytes is the longest id of a proposed or revised step, and of each of its
	// dependencies.
	MaxStepIDBytes = 256
	// MaxTools is the most tools a request may offer (available_tools), each named in at most
	// toolname.MaxRequestBytes: toolname.MaxRequestTools, the intent stage's limit too.
	MaxTools = toolname.MaxRequestTools
	// MaxToolDescriptionsBytes is the most bytes the descriptions of a request's tools may
	// have in all: a kilobyte for each of MaxTools tools, which the rules read for every
	// clause of the goal.
	MaxToolDescriptionsBytes = 1 << 20
)

// checkLimits refuses a request over one of the limits, naming the field and the limit;
// maxGoal is the goal's limit, which is a step description's too (the rules make a step of
// each clause of the goal, and the goal is one when it has a single clause).
func checkLimits(req *planningv1.PlanRequest, maxGoal int) error {
	if n := req.GetMaxSteps(); n > plan.MaxStepsLimit {
		return stageerr.Invalid("max_steps: at most %d, got %d", plan.MaxStepsLimit, n)
	}
	cs := req.GetConstraints()
	if len(cs) > MaxConstraints {
		return stageerr.Invalid("constraints: at most %d, got %d", MaxConstraints, len(cs))
	}
	size := 0
	for _, c := range cs {
		size += len(c)
	}
	if size > MaxConstraintsBytes {
		return stageerr.Invalid("constraints: at most %d bytes in all, got %d", MaxConstraintsBytes, size)
	}
	if err := checkTools(req.GetAvailableTools()); err != nil {
		return err
	}
	for i, st := range req.GetProposedSteps() {
		if err := checkStep(fmt.Sprintf("proposed_steps[%d]", i), st, maxGoal); err != nil {
			return err
		}
	}
	if n := len(req.GetRevision().GetReason()); n > plan.MaxReasonBytes {
		return stageerr.Invalid("revision.reason: at most %d bytes, got %d", plan.MaxReasonBytes, n)
	}
	steps := req.GetRevision().GetSteps()
	if len(steps) > plan.MaxStepsLimit {
		return stageerr.Invalid("revision.steps: at most %d, got %d", plan.MaxStepsLimit, len(steps))
	}
	for i, p := range steps {
		if err := checkStep(fmt.Sprintf("revision.steps[%d].step", i), p.GetStep(), maxGoal); err != nil {
			return err
		}
		if n := len(p.GetNote()); n > plan.MaxNoteBytes {
			return stageerr.Invalid("revision.steps[%d].note: at most %d bytes, got %d",
				i, plan.MaxNoteBytes, n)
		}
		if n := len(plan.OutputJSON(p.GetOutput())); n > plan.MaxOutputBytes {
			return stageerr.Invalid("revision.steps[%d].output: at most %d bytes of JSON, got %d",
				i, plan.MaxOutputBytes, n)
		}
	}
	return nil
}

// checkTools refuses more than MaxTools tools, a tool's name over toolname.MaxRequestBytes
// and descriptions over MaxToolDescriptionsBytes in all.
func checkTools(tools []*typev1.Tool) error {
	if len(tools) > MaxTools {
		return stageerr.Invalid("available_tools: at most %d, got %d", MaxTools, len(tools))
	}
	size := 0
	for i, t := range tools {
		if n := len(t.GetName()); n > toolname.MaxRequestBytes {
			return stageerr.Invalid("available_tools[%d].name: at most %d bytes, got %d",
				i, toolname.MaxRequestBytes, n)
		}
		size += len(t.GetDescription())
	}
	if size > MaxToolDescriptionsBytes {
		return stageerr.Invalid("available_tools: descriptions at most %d bytes in all, got %d",
			MaxToolDescriptionsBytes, size)
	}
	return nil
}

// checkStep refuses a step (field names it) whose fields are over their limits.
func checkStep(field string, st *typev1.Step, maxGoal int) error {
	switch {
	case len(st.GetId()) > MaxStepIDBytes:
		return stageerr.Invalid("%s.id: at most %d bytes, got %d",
			field, MaxStepIDBytes, len(st.GetId()))
	case len(st.GetDescription()) > maxGoal:
		return stageerr.Invalid("%s.description: at most %d bytes (as the goal), got %d",
			field, maxGoal, len(st.GetDescription()))
	case len(st.GetToolName()) > toolname.MaxRequestBytes:
		return stageerr.Invalid("%s.tool_name: at most %d bytes, got %d",
			field, toolname.MaxRequestBytes, len(st.GetToolName()))
	case len(st.GetDependsOn()) > plan.MaxStepsLimit:
		return stageerr.Invalid("%s.depends_on: at most %d ids, got %d",
			field, plan.MaxStepsLimit, len(st.GetDependsOn()))
	}
	for j, dep := range st.GetDependsOn() {
		if len(dep) > MaxStepIDBytes {
			return stageerr.Invalid("%s.depends_on[%d]: at most %d bytes, got %d",
				field, j, MaxStepIDBytes, len(dep))
		}
	}
	return nil
}

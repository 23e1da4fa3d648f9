package planning

import (
	"slices"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"google.golang.org/protobuf/proto"
)

// revise revises a plan by the rules: the steps stay in their order with their ids and
// dependencies; a step that is not done and uses a tool that failed (the tool of a failed
// step) is matched again against the usable tools other than those, and becomes a reasoning
// step, which the model does, when none overlaps it. The result is validated like proposed
// steps.
func revise(rev *planningv1.PlanRevision, in *input) ([]*typev1.Step, error) {
	var failed []string
	for _, p := range rev.GetSteps() {
		if p.GetState() == typev1.StepState_STEP_STATE_FAILED && p.GetStep().GetToolName() != "" {
			failed = append(failed, p.GetStep().GetToolName())
		}
	}
	var others []*typev1.Tool
	for _, t := range usableTools(in.req.GetAvailableTools(), in.req.GetConstraints()) {
		if !slices.Contains(failed, t.GetName()) {
			others = append(others, t)
		}
	}
	m := newMatcher(others)
	steps := make([]*typev1.Step, len(rev.GetSteps()))
	for i, p := range rev.GetSteps() {
		st := proto.CloneOf(p.GetStep())
		if p.GetState() != typev1.StepState_STEP_STATE_DONE && slices.Contains(failed, st.GetToolName()) {
			st.ToolName = m.best(st.GetDescription())
		}
		steps[i] = st
	}
	return normalise("steps", steps, in.tools, in.limit)
}

// remaining counts the steps of a revision that are not done; a new plan has none done.
func remaining(steps []*typev1.Step, rev *planningv1.PlanRevision) int {
	n := 0
	for _, st := range steps {
		if !done(st, rev) {
			n++
		}
	}
	return n
}

// done reports whether a step is the same work as a step the revision has done; no step of a
// new plan is.
func done(st *typev1.Step, rev *planningv1.PlanRevision) bool {
	return slices.ContainsFunc(rev.GetSteps(), func(p *typev1.StepProgress) bool {
		return p.GetState() == typev1.StepState_STEP_STATE_DONE && plan.SameWork(st, p.GetStep())
	})
}

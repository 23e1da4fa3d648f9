package plan

import (
	"fmt"
	"slices"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// KeepsDone returns why steps, a revision of the plan whose progress is progress, do not keep
// every step that is done as it was (the same work: SameWork), or nil when they do. The steps
// that are done ran: a revision that rewrote or dropped one would have the run do its work
// again (send the same mail twice) or lose its output.
func KeepsDone(steps []*typev1.Step, progress []*typev1.StepProgress) error {
	for _, p := range progress {
		if p.GetState() != typev1.StepState_STEP_STATE_DONE {
			continue
		}
		done := p.GetStep()
		i := slices.IndexFunc(steps, func(st *typev1.Step) bool { return st.GetId() == done.GetId() })
		switch {
		case i < 0:
			return fmt.Errorf("done step %q is missing: a revision keeps the steps that are done", done.GetId())
		case !SameWork(steps[i], done):
			return fmt.Errorf("done step %q is not kept as it was (%q, tool %q): a revision keeps the steps that are done",
				done.GetId(), done.GetDescription(), done.GetToolName())
		}
	}
	return nil
}

// SameWork reports whether two steps are the same work: the same id, description and tool.
func SameWork(a, b *typev1.Step) bool {
	return a.GetId() == b.GetId() && a.GetDescription() == b.GetDescription() && a.GetToolName() == b.GetToolName()
}

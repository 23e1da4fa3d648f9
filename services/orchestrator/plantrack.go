package orchestrator

import (
	"fmt"
	"slices"
	"strings"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/pkg/textcut"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// planTracker follows a run's plan from the observations: a step is done when a call of its
// tool succeeded, or, for a step without a tool, when the model answered the turn it was
// current in; failed when its tool failed beyond recovery (after the action stage's retries
// and the recovery stage's alternatives). A failed step, or a call of a tool that no step
// names (the model left the plan; the call is added to the plan as a step of its own), makes
// a revision due before the next turn (seed 003: Error/Recovery → Planning). It lives on the
// run's goroutine and in its checkpoints.
type planTracker struct {
	steps     []*typev1.StepProgress
	revisions int32    // revisions made
	revise    []string // why a revision is due; empty when none is
	unplanned int32    // steps added for calls outside the plan
}

// newPlanTracker tracks steps, all pending.
func newPlanTracker(steps []*typev1.Step) *planTracker {
	p := &planTracker{}
	p.take(steps)
	return p
}

// take replaces the plan with steps: a step keeps its state, note and output when it is done
// and the new plan has the same work (id, description and tool); every other step is pending.
func (p *planTracker) take(steps []*typev1.Step) {
	out := make([]*typev1.StepProgress, len(steps))
	for i, st := range steps {
		out[i] = &typev1.StepProgress{Step: st, State: typev1.StepState_STEP_STATE_PENDING}
		if old := p.find(st.GetId()); old != nil && old.GetState() == typev1.StepState_STEP_STATE_DONE && plan.SameWork(old.GetStep(), st) {
			out[i].State, out[i].Note, out[i].Output = old.GetState(), old.GetNote(), old.GetOutput()
		}
	}
	p.steps = out
}

// find is the step of id, or nil.
func (p *planTracker) find(id string) *typev1.StepProgress {
	if p == nil {
		return nil
	}
	for _, s := range p.steps {
		if s.GetStep().GetId() == id {
			return s
		}
	}
	return nil
}

// current is the step the coming turn works on: the first pending step, in plan order, whose
// dependencies are all done, else the first pending step; nil when no step is pending.
func (p *planTracker) current() *typev1.StepProgress {
	if p == nil {
		return nil
	}
	var first *typev1.StepProgress
	for _, s := range p.steps {
		if s.GetState() != typev1.StepState_STEP_STATE_PENDING {
			continue
		}
		if p.ready(s) {
			return s
		}
		if first == nil {
			first = s
		}
	}
	return first
}

// ready reports whether every dependency of s is done.
func (p *planTracker) ready(s *typev1.StepProgress) bool {
	return !slices.ContainsFunc(s.GetStep().GetDependsOn(), func(id string) bool {
		return p.find(id).GetState() != typev1.StepState_STEP_STATE_DONE
	})
}

// unplannedID is the id of the next step added for a call outside the plan: "unplanned-N",
// with an N no step of the plan has in its id (a planning model may name a step so).
func (p *planTracker) unplannedID() string {
	for {
		p.unplanned++
		if id := fmt.Sprintf("unplanned-%d", p.unplanned); p.find(id) == nil {
			return id
		}
	}
}

// answered marks the step without a tool that was current in turn done: the model answered
// that turn.
func (p *planTracker) answered(step *typev1.StepProgress, turn int32) {
	if step == nil || step.GetStep().GetToolName() != "" || step.GetState() != typev1.StepState_STEP_STATE_PENDING {
		return
	}
	step.State, step.Note = typev1.StepState_STEP_STATE_DONE, fmt.Sprintf("answered in turn %d", turn)
}

// observe records an executed call of tool that succeeded (ok, with its structured output)
// or failed beyond recovery (why). The call works on the first pending step of that tool whose dependencies are done,
// else the first pending one, else a failed one (a retry); a call of a step that is done
// already changes nothing. A call of a tool no step names is added as a step of its own.
// It returns what the transcript says of it.
func (p *planTracker) observe(tool, callID string, ok bool, output *structpb.Struct, why string, turn int32) string {
	step := p.stepFor(tool)
	if step == nil {
		step = &typev1.StepProgress{Step: &typev1.Step{
			Id: p.unplannedID(), Description: fmt.Sprintf("call %s (%s), which the plan did not foresee", tool, callID), ToolName: tool,
		}}
		at := slices.IndexFunc(p.steps, func(s *typev1.StepProgress) bool { return s.GetState() != typev1.StepState_STEP_STATE_DONE })
		if at < 0 {
			at = len(p.steps)
		}
		p.steps = slices.Insert(p.steps, at, step)
		p.due(fmt.Sprintf("the model called %s, which no step of the plan uses", tool))
	} else if step.GetState() == typev1.StepState_STEP_STATE_DONE {
		return "plan: " + step.GetStep().GetId() + " was done already"
	}
	if ok {
		step.State, step.Note, step.Output = typev1.StepState_STEP_STATE_DONE, fmt.Sprintf("%s succeeded in turn %d", callID, turn), output
		p.passed(step)
		return "plan: " + step.GetStep().GetId() + " done"
	}
	why = textcut.Middle(why, plan.MaxNoteBytes, cutMark) // a tool's error, of any length
	step.State, step.Note = typev1.StepState_STEP_STATE_FAILED, why
	p.due(fmt.Sprintf("step %s (%s) failed: %s", step.GetStep().GetId(), tool, why))
	return "plan: " + step.GetStep().GetId() + " failed"
}

// stepFor is the step a call of tool works on (see observe), or nil when no step names tool.
func (p *planTracker) stepFor(tool string) *typev1.StepProgress {
	var pending, failed, done *typev1.StepProgress
	for _, s := range p.steps {
		if s.GetStep().GetToolName() != tool {
			continue
		}
		switch s.GetState() {
		case typev1.StepState_STEP_STATE_PENDING:
			if p.ready(s) {
				return s
			}
			if pending == nil {
				pending = s
			}
		case typev1.StepState_STEP_STATE_FAILED:
			if failed == nil {
				failed = s
			}
		default:
			if done == nil {
				done = s
			}
		}
	}
	switch {
	case pending != nil:
		return pending
	case failed != nil:
		return failed
	}
	return done
}

// passed marks the pending steps without a tool that step depends on, directly or not, done:
// the model went past them.
func (p *planTracker) passed(step *typev1.StepProgress) {
	for _, id := range step.GetStep().GetDependsOn() {
		dep := p.find(id)
		if dep == nil || dep.GetState() != typev1.StepState_STEP_STATE_PENDING || dep.GetStep().GetToolName() != "" {
			continue
		}
		dep.State, dep.Note = typev1.StepState_STEP_STATE_DONE, "passed"
		p.passed(dep)
	}
}

// due records why a revision is due.
func (p *planTracker) due(reason string) {
	if !slices.Contains(p.revise, reason) {
		p.revise = append(p.revise, reason)
	}
}

// reason says why a revision is due; empty when none is.
func (p *planTracker) reason() string {
	if p == nil {
		return ""
	}
	return textcut.Middle(strings.Join(p.revise, "; "), plan.MaxReasonBytes, cutMark)
}

// cutMark stands for what the middle of a note or reason cut to its limit held.
const cutMark = " … "

// progress is a copy of the plan's steps with their states, for a request or an event.
func (p *planTracker) progress() []*typev1.StepProgress {
	if p == nil {
		return nil
	}
	out := make([]*typev1.StepProgress, len(p.steps))
	for i, s := range p.steps {
		out[i] = proto.CloneOf(s)
	}
	return out
}

// plan is the plan's steps.
func (p *planTracker) plan() []*typev1.Step {
	if p == nil {
		return nil
	}
	steps := make([]*typev1.Step, len(p.steps))
	for i, s := range p.steps {
		steps[i] = s.GetStep()
	}
	return steps
}

// checkpoint is the tracker as a checkpoint holds it (sharing its steps: it is encoded before
// they change).
func (p *planTracker) checkpoint() *checkpointv1.PlanTracker {
	if p == nil {
		return nil
	}
	return &checkpointv1.PlanTracker{Steps: p.steps, Revisions: p.revisions, Revise: p.revise, Unplanned: p.unplanned}
}

// restorePlanTracker is the tracker of a checkpoint; one written by a replica that knew only
// the plan tracks it from the start.
func restorePlanTracker(cp *checkpointv1.RunCheckpoint) *planTracker {
	pt := cp.GetPlanTracker()
	if pt == nil {
		if len(cp.GetPlan()) == 0 {
			return nil
		}
		return newPlanTracker(cp.GetPlan())
	}
	p := &planTracker{revisions: pt.GetRevisions(), unplanned: pt.GetUnplanned(), revise: slices.Clone(pt.GetRevise())}
	for _, s := range pt.GetSteps() {
		p.steps = append(p.steps, proto.CloneOf(s))
	}
	return p
}

// trackCall tells the plan tracker how an executed call ended, as the observation stage saw
// it (a call refused before it ran changes nothing), and returns what the transcript says of
// it. A call succeeded when the action stage says it did and its result was observed as a
// success: a result the observation stage could not observe fails its step, whatever the tool
// said, and a failed call fails its step, whatever a replacement observation stage says. Its
// structured result goes with the step (stepOutput).
func (r *run) trackCall(call *typev1.ToolCall, res *actionv1.ExecuteResponse, obs *observationv1.ObserveResponse) string {
	if r.tracker == nil || !executed(res) {
		return ""
	}
	status := res.GetStatus()
	ok := obs.GetSuccess() && status != typev1.ToolStatus_TOOL_STATUS_ERROR &&
		status != typev1.ToolStatus_TOOL_STATUS_TIMEOUT
	why := res.GetError()
	switch {
	case status == typev1.ToolStatus_TOOL_STATUS_TIMEOUT:
		why = "timeout"
	case status == typev1.ToolStatus_TOOL_STATUS_SUCCESS && !ok:
		why = "the result could not be observed"
	}
	return r.tracker.observe(call.GetName(), call.GetId(), ok, stepOutput(obs.GetStructured()), why, r.turns)
}

// stepOutput is the structured result a step keeps: s when it encodes to at most
// plan.MaxOutputBytes bytes of JSON, else nil.
func stepOutput(s *structpb.Struct) *structpb.Struct {
	if out := plan.OutputJSON(s); out == "" || len(out) > plan.MaxOutputBytes { // as the stages show it
		return nil
	}
	return s
}

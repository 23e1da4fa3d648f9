package orchestrator

import (
	"context"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"google.golang.org/protobuf/proto"
)

// announcePause announces the pause a run was resumed in (its approval_requested or
// input_requested, after run_resumed) when the run's events do not hold it: its replica
// stored the pause and stopped before announcing it. A pause's checkpoint is where a
// draining replica hands its run off (a deploy that began while the run's turn ran on), and
// a replica may die between the two writes; whoever followed the run's events then waited,
// never shown what the run asks, until the pause timed out. A pause announced already is not
// announced again (run_resumed says the run waits there still), nor one decided whole.
func (r *run) announcePause(ctx context.Context) {
	cp := r.resumeFrom
	var ev *eventv1.RunEvent
	switch cp.GetPhase() {
	case checkpointv1.Phase_PHASE_AWAITING_APPROVAL:
		if cp.GetPending() == nil || len(restoreApproval(cp).undecided()) == 0 {
			return
		}
		ev = &eventv1.RunEvent{Kind: &eventv1.RunEvent_ApprovalRequested{
			ApprovalRequested: &eventv1.ApprovalRequested{PendingAction: cp.GetPending()}}}
	case checkpointv1.Phase_PHASE_AWAITING_INPUT:
		if cp.GetQuestion() == nil {
			return
		}
		ev = &eventv1.RunEvent{Kind: &eventv1.RunEvent_InputRequested{
			InputRequested: &eventv1.InputRequested{Question: cp.GetQuestion()}}}
	default:
		return
	}
	msg, err := lastStored(r.publishContext(ctx), r.svc.js, r.id, events.Kind(ev))
	if err != nil {
		r.svc.log.WarnContext(ctx, "looking up whether the run's pause was announced failed; "+
			"it is not announced again", "run_id", r.id, "err", err)
		return
	}
	if msg != nil && announces(msg.Data, ev) {
		return
	}
	r.emit(ctx, ev)
}

// announces reports whether data, a stored event of the kind of ev, announces ev's pause: the
// same approval request (when it began and expires) or the same question.
func announces(data []byte, ev *eventv1.RunEvent) bool {
	stored := &eventv1.RunEvent{}
	if proto.Unmarshal(data, stored) != nil {
		return false
	}
	if want := ev.GetApprovalRequested().GetPendingAction(); want != nil {
		got := stored.GetApprovalRequested().GetPendingAction()
		return proto.Equal(got.GetRequestedAt(), want.GetRequestedAt()) &&
			proto.Equal(got.GetExpiresAt(), want.GetExpiresAt())
	}
	want, got := ev.GetInputRequested().GetQuestion(), stored.GetInputRequested().GetQuestion()
	return got.GetId() == want.GetId() && proto.Equal(got.GetExpiresAt(), want.GetExpiresAt())
}

package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// approvalState is a pause: tool calls waiting for a person (seed 003 Human-in-Loop).
type approvalState struct {
	pending   *typev1.PendingAction
	decisions map[string]*agentv1.ResolveApprovalRequest // call id → decision
	by        map[string]string                          // call id → who decided, when known
	resolved  chan struct{}                              // closed when every call is decided
}

// stopper is the first paused call's decision that rejects it and ends the run (seed 003
// USER_REJECTED), or nil.
func (a *approvalState) stopper(c *typev1.ExecutionContract) *agentv1.ResolveApprovalRequest {
	for _, call := range a.pending.GetToolCalls() {
		if d := a.decisions[call.GetId()]; endsRun(c, d) {
			return d
		}
	}
	return nil
}

// endsRun reports whether decision d is a rejection that ends the run: its end_run says so,
// or, when unset, the contract's reject_ends_run (config tools.reject_ends_run).
func endsRun(c *typev1.ExecutionContract, d *agentv1.ResolveApprovalRequest) bool {
	if d.GetDecision() != agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT {
		return false
	}
	if d.EndRun != nil {
		return d.GetEndRun()
	}
	return c.GetRejectEndsRun()
}

func (a *approvalState) undecided() []string {
	var ids []string
	for _, c := range a.pending.GetToolCalls() {
		if _, ok := a.decisions[c.GetId()]; !ok {
			ids = append(ids, c.GetId())
		}
	}
	return ids
}

// requiresApproval reports whether a tool may run only with a recorded approval.
func (r *run) requiresApproval(name string) bool {
	return slices.ContainsFunc(r.available, func(t *typev1.Tool) bool { return t.GetName() == name && t.GetRequiresApproval() })
}

// awaitApproval pauses the run until every call that needs approval is decided, a rejection
// ends the run (REJECTED / USER_REJECTED: see endsRun), the approval timeout passes (a
// rejection: the run ends REJECTED / APPROVAL_TIMEOUT) or the run is cancelled. Decisions are
// applied to plan: approved calls run with the recorded approval, modified calls with the new
// arguments (validated again by the action stage), rejected calls are answered to the model as
// tool failures; once a rejection ends the run, no call of the turn runs. A pause is
// checkpointed, and so is each decision: the run can be stopped here (a deploy) and resumed by
// any replica, which waits until the same deadline. A run restored from a paused checkpoint
// continues its pause.
func (r *run) awaitApproval(ctx context.Context, t *turnState, plan []plannedCall) *ending {
	r.mu.Lock()
	st := r.approval
	r.mu.Unlock()
	if st == nil {
		// Stored before it is announced: whoever hears of the pause can decide on any replica.
		st = r.pause(ctx, plan)
		if e := r.persist(ctx, checkpointv1.Phase_PHASE_AWAITING_APPROVAL, t, plan); e != nil {
			return e
		}
		// GetRun answers with the snapshot before anyone hears of the pause.
		r.publish(r.pausedResult(st.pending))
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_ApprovalRequested{ApprovalRequested: &eventv1.ApprovalRequested{PendingAction: st.pending}}})
		if e := r.yield(func(ctx context.Context) *ending { return r.awaitApproval(ctx, t, plan) }); e != nil {
			return e
		}
	} else {
		r.publish(r.pausedResult(st.pending))
	}
	end, stopped := r.waitDecisions(ctx, st, func() *ending { return r.checkpoint(ctx, checkpointv1.Phase_PHASE_AWAITING_APPROVAL, t, plan) })
	if stopped {
		return end
	}
	r.mu.Lock()
	r.approval = nil
	decisions, by := st.decisions, st.by
	stop := st.stopper(r.contract)
	r.mu.Unlock()
	r.publish(nil)
	if end == nil && stop != nil {
		end = r.rejected(st, stop)
	}
	r.applyDecisions(plan, decisions, by, end != nil, stop)
	return end
}

// waitDecisions waits while the pause st goes on (see waiting), taking the decisions handed
// over by the store, each checkpointed by save. No decision within approval_timeout_ms of a
// call is its timeout, and ends the run REJECTED / APPROVAL_TIMEOUT (the returned ending). A
// stop (the replica drains, the run is handed off, a checkpoint fails) returns its ending
// with stopped set: the pause stays as it is, checkpointed, for the replica that resumes it.
// A cancelled run stops waiting with neither, taking the decisions queued before (their
// callers were told the run has them) but checkpointing none. The run's deadline closes the
// pause, as the pause's own timer does (it expires then at the latest), and ends the run
// TIMEOUT.
func (r *run) waitDecisions(ctx context.Context, st *approvalState, save func() *ending) (end *ending, stopped bool) {
	timer := time.NewTimer(st.pending.GetExpiresAt().AsTime().Sub(r.svc.now()))
	defer timer.Stop()
	for r.waiting(st) {
		select {
		case <-st.resolved: // decided on this replica (no store)
			return nil, false
		case <-r.inputs.ready:
			if e := r.queuedDecisions(ctx, st, save); e != nil {
				return e, true
			}
		case <-r.svc.draining:
			return stopHere(errHandOff.Error()), true // the pause is checkpointed: another replica waits on
		case <-ctx.Done():
			if e := stopCause(ctx); e != nil {
				return e, true
			}
			if !errors.Is(context.Cause(ctx), errTotalTimeout) {
				// Cancelled: the decisions queued before the cancellation (the select may
				// take either) are the run's, as ResolveApproval told their callers: they
				// are recorded, though no call runs once the run is cancelled. The ended
				// run is not checkpointed here.
				r.queuedDecisions(ctx, st, func() *ending { return nil })
				return nil, false
			}
			// The run's deadline, which the pause's expires_at never passes (pauseExpiry), came
			// before the pause's timer: the pause has expired too.
			if e, stopped := r.expireDecisions(ctx, st, save); stopped {
				return e, true
			}
			return r.totalTimeout(), false
		case <-timer.C:
			if e, stopped := r.expireDecisions(ctx, st, save); e != nil || stopped {
				return e, stopped
			}
			// Decided in time, handed over after the deadline: the run goes on.
		}
	}
	if timedOut := r.timedOut(st); len(timedOut) > 0 {
		// Closed by the replica that owned the run before.
		return r.approvalTimeout(st, timedOut), false
	}
	if r.svc.store == nil {
		// Decided on this replica before the wait began (a decision may come as soon as the
		// pause is announced): resolve closes resolved once it has recorded the last decision
		// in the transcript, where the run's ending must find it.
		select {
		case <-st.resolved:
		case <-ctx.Done():
		}
	}
	return nil, false
}

// queuedDecisions takes the decisions queued for the run while the pause st goes on, each
// checkpointed by save; it returns save's ending when a checkpoint fails.
func (r *run) queuedDecisions(ctx context.Context, st *approvalState, save func() *ending) *ending {
	for r.waiting(st) {
		in, ok := r.inputs.next()
		if !ok {
			return nil
		}
		if r.takeDecision(ctx, st, in.Decision, in.By) {
			if e := save(); e != nil {
				return e
			}
		}
	}
	return nil
}

// expireDecisions ends the wait for decisions on the pause st, whose expires_at has passed:
// closed (closeDecisions), it ends the run when a call timed out (approvalTimeout). The
// decisions taken before are recorded, and checkpointed by save, since ResolveApproval told
// their callers so; when the pause expired at the run's deadline, the run ends TIMEOUT all
// the same. Otherwise it returns neither an ending nor a stop.
func (r *run) expireDecisions(ctx context.Context, st *approvalState, save func() *ending) (
	end *ending, stopped bool) {
	timedOut, took := r.closeDecisions(ctx, st)
	if len(timedOut) > 0 {
		return r.approvalTimeout(st, timedOut), false
	}
	if took {
		if e := save(); e != nil {
			return e, true
		}
	}
	if r.endsAtDeadline(st.pending.GetExpiresAt()) {
		return r.totalTimeout(), false
	}
	return nil, false
}

// approvalTimeout ends a run whose paused calls timedOut of the pause st were not decided in
// time: APPROVAL_TIMEOUT, or TIMEOUT when the pause expired at the run's deadline
// (pauseExpiry).
func (r *run) approvalTimeout(st *approvalState, timedOut []string) *ending {
	if r.endsAtDeadline(st.pending.GetExpiresAt()) {
		return r.totalTimeout()
	}
	return fail(typev1.Outcome_OUTCOME_REJECTED, ExitApprovalTimeout, "Nobody approved the requested action in time, so it was not carried out.",
		fmt.Sprintf("no decision within approval_timeout_ms (%d ms) for %s", r.contract.GetApprovalTimeoutMs(), strings.Join(timedOut, ", ")))
}

// closeDecisions closes the pause st once its deadline has passed: each call still undecided
// times out, unless a decision on it was taken before (ResolveApproval told its caller so),
// though the run may not have it yet (the store's watch has not handed it over; or it was
// recorded while no replica owned the paused run, which a replica adopted after the
// deadline): it is read from the store. With the store, the first of the decision and the
// run's closing record (a decision without one, which ResolveApproval never records) wins,
// whichever replica wrote it. The store is written in a context of its own (closingContext),
// since the run's may have ended at the deadline. It returns the calls that timed out,
// recorded as such, and whether it took a decision.
func (r *run) closeDecisions(ctx context.Context, st *approvalState) (timedOut []string, took bool) {
	r.mu.Lock()
	undecided := st.undecided()
	if r.svc.store == nil {
		for _, id := range undecided {
			st.decisions[id] = nil // under the lock resolve takes: a decision comes before, or finds the call decided
		}
	}
	r.mu.Unlock()
	if r.svc.store == nil {
		for _, id := range undecided {
			r.recordDecision(ctx, &eventv1.ApprovalResolved{CallId: id, Decision: "timeout"})
		}
		return undecided, false
	}
	ctx, cancel := r.closingContext(ctx)
	defer cancel()
	for _, id := range undecided {
		err := r.svc.store.Decide(ctx, &agentv1.ResolveApprovalRequest{RunId: r.id, CallId: id}, "")
		if errors.Is(err, runstore.ErrExists) {
			// Decided first, which the watch may not have handed over yet.
			in, err := r.svc.store.Decided(ctx, r.id, id)
			if err == nil {
				took = r.takeDecision(ctx, st, in.Decision, in.By) || took
				continue
			}
			if !errors.Is(err, runstore.ErrCancelled) { // else after the cancellation: not the run's
				r.svc.log.WarnContext(ctx, "reading the decision on an expired approval failed",
					"run_id", r.id, "call_id", id, "err", err)
			}
		} else if err != nil && !errors.Is(err, runstore.ErrCancelled) {
			r.svc.log.WarnContext(ctx, "closing an expired approval in the store failed", "run_id", r.id, "call_id", id, "err", err)
		}
		r.mu.Lock()
		st.decisions[id] = nil
		r.mu.Unlock()
		r.recordDecision(ctx, &eventv1.ApprovalResolved{CallId: id, Decision: "timeout"})
	}
	return r.timedOut(st), took
}

// timedOut are the paused calls that timed out.
func (r *run) timedOut(st *approvalState) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, c := range st.pending.GetToolCalls() {
		if d, decided := st.decisions[c.GetId()]; decided && d == nil {
			ids = append(ids, c.GetId())
		}
	}
	return ids
}

// approvalExpired is the error of a decision on call callID of pending past its expires_at:
// the calls still undecided time out, and the run ends APPROVAL_TIMEOUT (at once, or when a
// replica adopts it), so the decision is not taken, nor acknowledged as resuming the run. nil
// while the pause is open.
func (s *Service) approvalExpired(runID, callID string, pending *typev1.PendingAction) error {
	if exp := pending.GetExpiresAt(); exp == nil || s.now().Before(exp.AsTime()) {
		return nil
	}
	return pauseExpired(runID, callID, pending)
}

// pauseExpired is the error of a decision on call callID of pending once the pause expired:
// by this replica's clock (approvalExpired), or closed by the run at its expires_at.
func pauseExpired(runID, callID string, pending *typev1.PendingAction) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "tool call %q of run %q waits for approval no more: the pause expired at %s",
		callID, runID, pending.GetExpiresAt().AsTime().Format(time.RFC3339Nano))
}

// waiting reports whether the pause goes on: a call is undecided, and no rejection ends the run.
func (r *run) waiting(st *approvalState) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(st.undecided()) > 0 && st.stopper(r.contract) == nil
}

// rejected is the ending of a run whose paused call a person rejected with a rejection that
// ends the run.
func (r *run) rejected(st *approvalState, d *agentv1.ResolveApprovalRequest) *ending {
	name := d.GetCallId()
	if i := slices.IndexFunc(st.pending.GetToolCalls(), func(c *typev1.ToolCall) bool { return c.GetId() == d.GetCallId() }); i >= 0 {
		name = st.pending.GetToolCalls()[i].GetName()
	}
	message := fmt.Sprintf(messageRejected, name)
	reason := fmt.Sprintf("call %s (%s) was rejected, and the rejection ends the run", d.GetCallId(), name)
	if fb := d.GetFeedback(); fb != "" {
		message += fmt.Sprintf(" The reason given: %q.", fb)
		reason += ": " + fb
	}
	return fail(typev1.Outcome_OUTCOME_REJECTED, ExitUserRejected, message, reason)
}

// pause starts waiting for approval of the calls of plan that need it: AWAIT_APPROVAL in the
// transcript and the REQUEST_CONFIRMATION decision.
func (r *run) pause(ctx context.Context, plan []plannedCall) *approvalState {
	var calls []*typev1.ToolCall
	for _, p := range plan {
		if awaitsApproval(p) {
			calls = append(calls, p.call)
		}
	}
	now := r.svc.now()
	timeout := time.Duration(r.contract.GetApprovalTimeoutMs()) * time.Millisecond
	st := &approvalState{
		pending: &typev1.PendingAction{
			RunId: r.id, ToolCalls: calls, RequestedAt: timestamppb.New(now), ExpiresAt: r.pauseExpiry(now, timeout),
			Reason: "these tool calls write, delete, run commands or spend money, and need your approval",
		},
		decisions: map[string]*agentv1.ResolveApprovalRequest{},
		resolved:  make(chan struct{}),
	}
	st0 := typev1.RunState_RUN_STATE_AWAIT_APPROVAL
	r.step(ctx, st0, r.stepID(st0), func(context.Context) (proto.Message, proto.Message, string) {
		return st.pending, nil, fmt.Sprintf("waiting for approval of %d call(s): %s", len(calls), strings.Join(callNames(calls), ", "))
	})
	r.decision = &typev1.AgentDecision{DecisionType: typev1.DecisionType_DECISION_TYPE_REQUEST_CONFIRMATION, ToolCalls: calls, PendingAction: st.pending}
	r.mu.Lock()
	r.approval = st
	r.mu.Unlock()
	return st
}

// restoreApproval is the pause a checkpoint was taken in, with the decisions it recorded.
func restoreApproval(cp *checkpointv1.RunCheckpoint) *approvalState {
	st := &approvalState{pending: cp.GetPending(), decisions: map[string]*agentv1.ResolveApprovalRequest{}, resolved: make(chan struct{})}
	for id, d := range cp.GetTurn().GetDecisions() {
		st.decisions[id] = d
	}
	for _, id := range cp.GetTurn().GetTimedOut() {
		st.decisions[id] = nil
	}
	for id, by := range cp.GetTurn().GetDecidedBy() {
		st.setBy(id, by)
	}
	return st
}

// takeDecision applies a decision handed over by the store, by whom it names: recorded in the
// transcript and announced, unless it is not for a waiting call (a late or repeated one),
// which is ignored.
func (r *run) takeDecision(ctx context.Context, st *approvalState, d *agentv1.ResolveApprovalRequest, by string) bool {
	if d == nil {
		return false
	}
	r.mu.Lock()
	_, decided := st.decisions[d.GetCallId()]
	waiting := slices.ContainsFunc(st.pending.GetToolCalls(), func(c *typev1.ToolCall) bool { return c.GetId() == d.GetCallId() })
	if decided || !waiting {
		r.mu.Unlock()
		return false
	}
	if d.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_UNSPECIFIED {
		// The pause's closing record (closeDecisions): the call timed out.
		st.decisions[d.GetCallId()] = nil
		r.mu.Unlock()
		r.recordDecision(ctx, &eventv1.ApprovalResolved{CallId: d.GetCallId(), Decision: "timeout"})
		return true
	}
	st.decisions[d.GetCallId()] = d
	st.setBy(d.GetCallId(), by)
	r.mu.Unlock()
	r.recordDecision(ctx, decisionRecord(d, endsRun(r.contract, d), by))
	return true
}

// setBy records that the principal by (empty when unknown) decided call callID.
func (a *approvalState) setBy(callID, by string) {
	if by == "" {
		return
	}
	if a.by == nil {
		a.by = map[string]string{}
	}
	a.by[callID] = by
}

// stored splits the decisions for a checkpoint: the people's, and the calls that timed out.
func (a *approvalState) stored() (map[string]*agentv1.ResolveApprovalRequest, []string) {
	decisions := map[string]*agentv1.ResolveApprovalRequest{}
	var timedOut []string
	for id, d := range a.decisions {
		if d == nil {
			timedOut = append(timedOut, id)
		} else {
			decisions[id] = d
		}
	}
	return decisions, timedOut
}

// decisionName is a decision as the transcript and events name it: approve, reject, modify.
func decisionName(d *agentv1.ResolveApprovalRequest) string {
	return strings.ToLower(strings.TrimPrefix(d.GetDecision().String(), "APPROVAL_DECISION_"))
}

// applyDecisions turns recorded decisions into what EXECUTE does with each call: an approved
// call runs approved by who decided it (by, call id → principal), or by the run's user when
// that is unknown (authentication off). ended says the run ends at this pause; stop is the
// rejection that ends it, if one does: then no call of the turn runs.
func (r *run) applyDecisions(plan []plannedCall, decisions map[string]*agentv1.ResolveApprovalRequest, by map[string]string,
	ended bool, stop *agentv1.ResolveApprovalRequest) {
	for i := range plan {
		p := &plan[i]
		if p.refusal != "" {
			continue
		}
		d, decided := decisions[p.call.GetId()]
		switch {
		case stop != nil && d != stop:
			p.refusal = "(tool failed: not run: the run ended when call " + stop.GetCallId() + " was rejected)"
		case !p.needsApproval && ended:
			p.refusal = "(tool failed: not run: the run ended waiting for approval)"
		case !p.needsApproval:
		case !decided:
			p.refusal = "(tool failed: interrupted while waiting for approval)"
		case d == nil:
			p.refusal = "(tool failed: approval timed out)"
		case d.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT:
			p.refusal = "(tool failed: rejected by the user" + feedbackSuffix(d.GetFeedback()) + ")"
		case d.GetDecision() == agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY:
			modified := proto.CloneOf(p.call)
			modified.Arguments = d.GetModifiedArguments()
			b, _ := protojson.Marshal(d.GetModifiedArguments())
			modified.RawArguments = string(b)
			p.call = modified
			p.note = "[arguments modified by the user: " + string(b) + "]\n"
			p.approval = &actionv1.Approval{Approved: true, Approver: r.approver(by, p.call.GetId()), Feedback: d.GetFeedback()}
		default:
			p.approval = &actionv1.Approval{Approved: true, Approver: r.approver(by, p.call.GetId()), Feedback: d.GetFeedback()}
		}
	}
}

// approver is who approved call callID, as its Approval names them: who decided it (by), or
// the run's user when that is unknown.
func (r *run) approver(by map[string]string, callID string) string {
	if id := by[callID]; id != "" {
		return id
	}
	return r.userID
}

func feedbackSuffix(feedback string) string {
	if feedback == "" {
		return ""
	}
	return ": " + feedback
}

func callNames(calls []*typev1.ToolCall) []string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.GetName() + " (" + c.GetId() + ")"
	}
	return names
}

// decisionRecord is the record of a person's decision d, by the principal by (empty when
// unknown); ends says it ends the run.
func decisionRecord(d *agentv1.ResolveApprovalRequest, ends bool, by string) *eventv1.ApprovalResolved {
	return &eventv1.ApprovalResolved{
		CallId: d.GetCallId(), Decision: decisionName(d), Feedback: d.GetFeedback(), Arguments: d.GetModifiedArguments(),
		EndsRun: ends, DecidedBy: by,
	}
}

// bySuffix is who did something, for a transcript entry's detail: " by " and a principal's
// id, or nothing when unknown.
func bySuffix(by string) string {
	if by == "" {
		return ""
	}
	return " by " + by
}

// recordDecision writes a decision to the transcript and announces it.
func (r *run) recordDecision(ctx context.Context, ev *eventv1.ApprovalResolved) {
	st := typev1.RunState_RUN_STATE_AWAIT_APPROVAL
	detail := ev.GetDecision() + " " + ev.GetCallId() + bySuffix(ev.GetDecidedBy()) + feedbackSuffix(ev.GetFeedback())
	if ev.GetEndsRun() {
		detail += "; the rejection ends the run"
	}
	// A decision arrives on its RPC's goroutine, while the run's may be changing the
	// conversation: the entry seals no messages (a decision adds none), so it never reads it.
	r.stepApart(ctx, st, r.stepID(st)+"/"+ev.GetCallId(), ev, detail)
	r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_ApprovalResolved{ApprovalResolved: ev}})
}

// resolve records one decision of a person; the run resumes when the last call is decided.
func (r *run) resolve(ctx context.Context, req *agentv1.ResolveApprovalRequest) (*agentv1.ResolveApprovalResponse, error) {
	r.mu.Lock()
	st := r.approval
	if st == nil {
		r.mu.Unlock()
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q has no tool call waiting for approval", r.id)
	}
	if !slices.ContainsFunc(st.pending.GetToolCalls(), func(c *typev1.ToolCall) bool { return c.GetId() == req.GetCallId() }) {
		r.mu.Unlock()
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND,
			"run %q has no tool call %q waiting for approval; waiting: %s", r.id, req.GetCallId(), strings.Join(st.undecided(), ", "))
	}
	if err := r.svc.approvalExpired(r.id, req.GetCallId(), st.pending); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if _, done := st.decisions[req.GetCallId()]; done {
		r.mu.Unlock()
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, "tool call %q of run %q is already decided", req.GetCallId(), r.id)
	}
	if err := planDecisionError(st.pending, req); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if err := modifiedArgumentsError(st.pending, r.offered, req); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if stop := st.stopper(r.contract); stop != nil {
		r.mu.Unlock()
		return nil, endingAlready(r.id, stop.GetCallId())
	}
	st.decisions[req.GetCallId()] = req
	st.setBy(req.GetCallId(), principalID(ctx))
	remaining := st.undecided()
	ends := endsRun(r.contract, req)
	if ends {
		remaining = nil // nothing waits any more: the run ends
	}
	r.mu.Unlock()
	// Record before resuming, so the decision precedes the executions in transcript and events.
	r.recordDecision(trace.ContextWithSpan(context.WithoutCancel(ctx), r.span), decisionRecord(req, ends, principalID(ctx)))
	if len(remaining) == 0 {
		close(st.resolved)
	}
	return &agentv1.ResolveApprovalResponse{RunId: r.id, CallId: req.GetCallId(), PendingCallIds: remaining, Resumed: len(remaining) == 0}, nil
}

// endingAlready is the error of a decision that comes after a rejection that ends the run.
func endingAlready(runID, callID string) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
		"run %q is ending: the rejection of call %q ends it, so no other call is decided", runID, callID)
}

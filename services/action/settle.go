package action

import (
	"context"
	"errors"
	"fmt"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// startedGrace is how long after its call's timeout a started record may still turn done:
// the time its replica takes to write the response. A started record older than the timeout
// and startedGrace belongs to an execution that died.
const startedGrace = 2 * time.Second

// interruptedError is the error of a call whose execution started and died, reported instead
// of running a tool that is not idempotent a second time. The observation stage shows it to
// the model as "(tool failed: interrupted by a restart; it may or may not have run)".
const interruptedError = "interrupted by a restart; it may or may not have run"

// outcome is how a call was settled.
type outcome struct {
	tool string
	// user is the user the call acted for; only a request for the same user gets resp.
	user string
	resp *actionv1.ExecuteResponse
	// fresh is true when the request that settled the call produced resp: it ran the tool,
	// or found it interrupted. Otherwise resp was read from the ledger.
	fresh bool
}

// settleOnce settles the call unless a concurrent request for the same call in this process
// already is, in which case it takes that request's outcome; it reports whether the outcome
// is this request's own. When the other request fails instead (it was refused, cancelled
// while queued, or the ledger failed it), this request settles the call itself.
func (s *Service) settleOnce(ctx context.Context, key callKey, req *actionv1.ExecuteRequest) (outcome, bool, error) {
	flightKey := fmt.Sprintf("%d:%s%s", len(key.runID), key.runID, key.callID)
	for {
		own := false
		ch := s.flight.DoChan(flightKey, func() (any, error) {
			own = true
			return s.settle(ctx, key, req)
		})
		select {
		case r := <-ch:
			if own || r.Err == nil {
				out, _ := r.Val.(outcome)
				return out, own, r.Err
			}
		case <-ctx.Done():
			return outcome{}, false, ctx.Err()
		}
	}
}

// settle answers the call from the ledger, or runs it and records it there. A write that finds
// the record changed means another replica got there first: settle reads the record again.
//
// Nearly every call is new, so settle first starts an admitted call as one without a record,
// without reading the ledger: its started record is created only where no record is, so a
// call the ledger knows (a retry, a resumed run, a race) runs nothing and is settled from its
// record as before. That saves a round trip to the ledger per call (issue 15). A call that is
// not admitted reads the ledger first, since its record may answer it.
func (s *Service) settle(ctx context.Context, key callKey, req *actionv1.ExecuteRequest) (outcome, error) {
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout == 0 {
		timeout = s.defaultTimeout
	}
	if reg, args, err := s.admit(ctx, req); err == nil {
		out, err := s.runRecorded(ctx, reg, s.call(ctx, reg, req, args), timeout, 0)
		if !errors.Is(err, ErrRecordChanged) {
			return out, err
		}
	}
	for {
		out, err := s.settleRecord(ctx, key, req, timeout)
		if !errors.Is(err, ErrRecordChanged) {
			return out, err
		}
	}
}

// settleRecord settles the call from its current record; ErrRecordChanged asks for another
// try.
func (s *Service) settleRecord(ctx context.Context, key callKey, req *actionv1.ExecuteRequest, timeout time.Duration) (outcome, error) {
	rec, rev, err := s.ledger.Get(ctx, key.runID, key.callID)
	switch {
	case errors.Is(err, ErrNoRecord):
		return s.start(ctx, req, timeout, 0)
	case err != nil:
		return outcome{}, ledgerUnavailable(err)
	}
	if err := checkTool(key, rec.GetToolName(), req.GetToolName()); err != nil {
		return outcome{}, err
	}
	if rec.GetState() == actionv1.CallState_CALL_STATE_DONE {
		return outcome{tool: rec.GetToolName(), user: rec.GetUserId(), resp: rec.GetResponse()}, nil
	}
	// Started: until its deadline, the execution may still finish on the instance that runs
	// it, as long as that instance lives.
	deadline := rec.GetStartedAt().AsTime().Add(timeout + startedGrace)
	if rec.GetDeadline() != nil {
		deadline = rec.GetDeadline().AsTime()
	}
	end := time.Now().Add(deadline.Sub(s.now())) // the clock of the record; the wait's is real
	for wait := time.Until(end); wait > 0; wait = time.Until(end) {
		if instance := rec.GetInstance(); instance != "" {
			alive, err := s.ledger.Alive(ctx, instance)
			if err != nil {
				return outcome{}, ledgerUnavailable(err)
			}
			if !alive {
				break // the execution died with its instance: it will never finish
			}
		}
		changed, err := s.awaitChange(ctx, key, rev, min(wait, livenessCheck))
		if err != nil {
			return outcome{}, err
		}
		if changed {
			return outcome{}, ErrRecordChanged
		}
	}
	return s.resume(ctx, req, timeout, rec, rev)
}

// livenessCheck is how often a call waiting for another instance's execution checks that the
// instance still lives.
const livenessCheck = instanceTTL / 3

// awaitChange waits up to wait for the call's record to leave revision rev and reports
// whether it did.
func (s *Service) awaitChange(ctx context.Context, key callKey, rev uint64, wait time.Duration) (changed bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err = s.ledger.Wait(wctx, key.runID, key.callID, rev)
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case wctx.Err() != nil:
		return false, nil
	default:
		return false, ledgerUnavailable(err)
	}
}

// resume settles a call whose execution died: its started record, at revision rev, outlived
// its deadline or its instance. An idempotent tool runs again, admitted like a new call; any other
// tool does not, and the call is recorded as interrupted.
func (s *Service) resume(ctx context.Context, req *actionv1.ExecuteRequest, timeout time.Duration, started *actionv1.CallRecord, rev uint64) (outcome, error) {
	reg, ok := s.registry().lookup(req.GetToolName())
	if ok && reg.def.GetIdempotent() {
		return s.start(ctx, req, timeout, rev)
	}
	resp := &actionv1.ExecuteResponse{
		Status:      typev1.ToolStatus_TOOL_STATUS_ERROR,
		Error:       interruptedError,
		ErrorCode:   typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR,
		Interrupted: true,
	}
	if ok {
		resp.Server = reg.def.GetServer()
	}
	done := &actionv1.CallRecord{
		RunId: started.GetRunId(), CallId: started.GetCallId(), ToolName: started.GetToolName(), UserId: started.GetUserId(),
		State: actionv1.CallState_CALL_STATE_DONE, Response: resp,
		StartedAt: started.GetStartedAt(), FinishedAt: timestamppb.New(s.now()),
	}
	if _, err := s.record(ctx, done, rev); err != nil {
		return outcome{}, err
	}
	return outcome{tool: req.GetToolName(), user: started.GetUserId(), resp: resp, fresh: true}, nil
}

// start admits the request and runs it as the call whose record is at revision rev.
func (s *Service) start(ctx context.Context, req *actionv1.ExecuteRequest, timeout time.Duration, rev uint64) (outcome, error) {
	reg, args, err := s.admit(ctx, req)
	if err != nil {
		return outcome{}, err
	}
	return s.runRecorded(ctx, reg, s.call(ctx, reg, req, args), timeout, rev)
}

// call is the Call an admitted request of tool reg makes: approved by the approver its grant
// signs when the tool requires approval (admit verified that the request names the same), none
// for a grant of an orchestrator that signed no approver.
func (s *Service) call(ctx context.Context, reg *registered, req *actionv1.ExecuteRequest,
	args map[string]any) Call {
	c := Call{UserID: actingUser(ctx, req), RunID: req.GetRunId(), CallID: req.GetCallId(),
		Arguments: args}
	if reg.def.GetRequiresApproval() {
		c.ApprovedBy = req.GetApproval().GetGrant().GetApprover()
	}
	return c
}

// runRecorded runs an admitted call and records it over revision rev: as started once the
// call holds its queue slot, right before its tool runs, and as done with the response after.
// A call cancelled while queued runs nothing and records nothing; one that timed out in the
// queue is recorded as done with its timeout. When the started record finds the record
// changed, another replica started the call first: the tool does not run and runRecorded
// returns ErrRecordChanged; when it, or the done record, goes unanswered, it is read back
// (readBack). A tool that ran is answered even when its done record cannot be written, which
// is logged: the record stays started, so later requests find the call interrupted, or it is
// another replica's, which took the call over after its timeout.
//
// An idempotent tool's call is recorded once, done (recordDone): running it again is harmless
// (a call whose execution died runs again, see resume), so the ledger need not hold it
// started, and the call makes one write to the ledger instead of two (issue 15).
func (s *Service) runRecorded(ctx context.Context, reg *registered, call Call, timeout time.Duration, rev uint64) (outcome, error) {
	name := reg.def.GetName()
	idempotent := reg.def.GetIdempotent()
	started := &actionv1.CallRecord{RunId: call.RunID, CallId: call.CallID, ToolName: name, UserId: call.UserID, State: actionv1.CallState_CALL_STATE_STARTED}
	ran := false
	resp, err := s.run(ctx, reg, call, timeout, func() error {
		if idempotent {
			started.StartedAt, ran = timestamppb.New(s.now()), true
			return nil
		}
		instance, err := s.ledger.Instance(ctx)
		if err != nil {
			return ledgerUnavailable(err)
		}
		now := s.now()
		started.Instance, started.StartedAt, started.Deadline = instance, timestamppb.New(now), timestamppb.New(now.Add(timeout+startedGrace))
		next, err := s.recordSure(ctx, started, rev)
		if err != nil {
			return err
		}
		rev, ran = next, true
		return nil
	})
	if err != nil {
		return outcome{}, err
	}
	done := &actionv1.CallRecord{
		RunId: call.RunID, CallId: call.CallID, ToolName: name, UserId: call.UserID,
		State: actionv1.CallState_CALL_STATE_DONE, Response: resp,
		StartedAt: started.GetStartedAt(), FinishedAt: timestamppb.New(s.now()),
	}
	if idempotent {
		return s.recordDone(ctx, done, rev)
	}
	if _, err = s.recordSure(ctx, done, rev); err != nil {
		if !ran {
			return outcome{}, err
		}
		s.logUnrecorded(ctx, done, err)
	}
	return outcome{tool: name, user: call.UserID, resp: resp, fresh: true}, nil
}

// recordDone records the response of an idempotent tool's call, done, over revision rev, and
// answers it. When another request recorded the call first, a started record (of an execution
// that may still finish) is overwritten: whichever response is recorded first answers the
// call. A done record, or one of another tool, returns ErrRecordChanged: the call is settled
// from it (settleRecord), as every request for it is. A write that goes unanswered is read
// back (readBack). A tool that ran is answered even when the ledger cannot record it, which is
// logged.
func (s *Service) recordDone(ctx context.Context, done *actionv1.CallRecord, rev uint64) (outcome, error) {
	fresh := outcome{tool: done.GetToolName(), user: done.GetUserId(), resp: done.GetResponse(), fresh: true}
	unrecorded := func(err error) (outcome, error) {
		s.logUnrecorded(ctx, done, err)
		return fresh, nil
	}
	for {
		_, err := s.recordSure(ctx, done, rev)
		switch {
		case err == nil:
			return fresh, nil
		case !errors.Is(err, ErrRecordChanged):
			return unrecorded(err)
		}
		rec, next, err := s.ledger.Get(ctx, done.GetRunId(), done.GetCallId())
		switch {
		case errors.Is(err, ErrNoRecord):
			rev = 0
		case err != nil:
			return unrecorded(err)
		case rec.GetState() == actionv1.CallState_CALL_STATE_DONE || rec.GetToolName() != done.GetToolName():
			return outcome{}, ErrRecordChanged
		default:
			rev = next
		}
	}
}

// recordSure is record, reading the call's record back when the write fails other than with
// ErrRecordChanged (readBack): a write that NATS stored, though its answer was lost, was made.
func (s *Service) recordSure(ctx context.Context, rec *actionv1.CallRecord, rev uint64) (uint64, error) {
	next, err := s.record(ctx, rec, rev)
	if err != nil && !errors.Is(err, ErrRecordChanged) {
		return s.readBack(ctx, rec, err)
	}
	return next, err
}

// readBack reads the record of rec's call after rec's write failed with err (the ledger
// unavailable): NATS may have stored a write whose answer it lost with the connection. When
// the ledger holds rec, it returns the record's revision: the write happened. Otherwise it
// returns err. A started record so stored and taken for failed was left to later requests for
// the call as a live instance's: they waited for it until its deadline, then reported the call
// interrupted, though its tool never ran.
func (s *Service) readBack(ctx context.Context, rec *actionv1.CallRecord, err error) (uint64, error) {
	ctx = context.WithoutCancel(ctx)
	got, rev, getErr := s.ledger.Get(ctx, rec.GetRunId(), rec.GetCallId())
	if getErr != nil || !proto.Equal(got, rec) {
		return 0, err
	}
	return rev, nil
}

// logUnrecorded logs a call whose tool ran but whose done record the ledger did not take.
func (s *Service) logUnrecorded(ctx context.Context, done *actionv1.CallRecord, err error) {
	s.log.ErrorContext(ctx, "tool ran but the call ledger did not record its result",
		"tool", done.GetToolName(), "run_id", done.GetRunId(), "call_id", done.GetCallId(), "err", err)
}

// record writes rec over revision rev. The write is detached from the request's cancellation,
// so a client that goes away does not leave it unknown whether it happened.
func (s *Service) record(ctx context.Context, rec *actionv1.CallRecord, rev uint64) (uint64, error) {
	next, err := s.ledger.Put(context.WithoutCancel(ctx), rec, rev)
	if err != nil && !errors.Is(err, ErrRecordChanged) {
		return 0, ledgerUnavailable(err)
	}
	return next, err
}

// ledgerUnavailable refuses a call the ledger cannot vouch for, without running it: the
// caller may retry once the ledger is back.
func ledgerUnavailable(err error) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE,
		"the call ledger is unavailable, so the tool was not run: %w", err)
}

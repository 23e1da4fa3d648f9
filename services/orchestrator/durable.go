package orchestrator

import (
	"context"
	"errors"
	"maps"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/validutf8"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
)

// Checkpoint write retries: a store outage (NATS down) holds the run until the store is back.
const (
	checkpointBackoff    = 100 * time.Millisecond
	checkpointMaxBackoff = 5 * time.Second
)

// checkpoint stores the run's state at a resumable point (phase; t and plan are the turn in
// progress). It returns a stop ending when the run must not go on here: its lease was lost
// (another replica advanced it), or this replica is draining and hands the run off at this
// point, where nothing is lost. Without a store it does nothing.
func (r *run) checkpoint(ctx context.Context, phase checkpointv1.Phase, t *turnState, plan []plannedCall) *ending {
	if e := r.persist(ctx, phase, t, plan); e != nil {
		return e
	}
	if r.svc.store != nil && r.svc.isDraining() && phase != checkpointv1.Phase_PHASE_FINISHED {
		return stopHere(errHandOff.Error())
	}
	return nil
}

// persist stores the run's state as checkpoint does, without handing the run off when the
// replica drains: for a pause, which is announced after it is stored and hands the run off
// while it waits, so that whoever follows the run hears of it from the replica that paused.
func (r *run) persist(ctx context.Context, phase checkpointv1.Phase, t *turnState, plan []plannedCall) *ending {
	if r.svc.store == nil {
		return nil
	}
	cp := r.snapshot(phase, t, plan)
	switch phase {
	case checkpointv1.Phase_PHASE_AWAITING_APPROVAL:
		if cp.Turn == nil { // a pause for the plan, between turns: turn holds only its decision
			cp.Turn = &checkpointv1.TurnCheckpoint{}
		}
		r.mu.Lock()
		cp.Pending = r.approval.pending
		cp.Turn.Decisions, cp.Turn.TimedOut = r.approval.stored()
		cp.Turn.DecidedBy = maps.Clone(r.approval.by)
		r.mu.Unlock()
	case checkpointv1.Phase_PHASE_AWAITING_INPUT:
		r.mu.Lock()
		cp.Question = r.asking.pending
		r.mu.Unlock()
	}
	return r.save(ctx, cp)
}

// save writes cp after the run's last checkpoint (its head), retrying a store that is down until it
// is back or the run is stopped.
//
// A checkpoint that cannot be encoded holds text that is not UTF-8, from a defect of a stage
// (with the stages in process, where no transport checks their answers): retrying could not
// help, and the run waited until its deadline. Its text is repaired in place instead (with the
// run's own, which the checkpoint shares: its result can then be sent too), and the repair
// logged as an error; a transcript entry that hashed the text before shows it changed.
func (r *run) save(ctx context.Context, cp *checkpointv1.RunCheckpoint) *ending {
	wait := checkpointBackoff
	repaired := false
	for {
		err := r.svc.store.Save(context.WithoutCancel(ctx), cp, r.head)
		if err == nil {
			return nil
		}
		if errors.Is(err, runstore.ErrUnencodable) {
			if repaired {
				r.svc.log.ErrorContext(ctx, "checkpoint cannot be encoded; the run goes on without it", "run_id", r.id, "err", err)
				return nil
			}
			repaired = true
			n := validutf8.Repair(cp)
			r.svc.log.ErrorContext(ctx, "checkpoint held text that is not UTF-8, which a stage passed on: replaced with U+FFFD", "run_id", r.id, "strings", n, "err", err)
			continue
		}
		if errors.Is(err, runstore.ErrConflict) {
			r.svc.log.WarnContext(ctx, "checkpoint conflict: another replica owns the run", "run_id", r.id, "err", err)
			return stopHere(errLeaseLost.Error())
		}
		r.svc.log.WarnContext(ctx, "checkpoint failed; retrying", "run_id", r.id, "phase", cp.GetPhase().String(), "err", err)
		if !sleep(ctx, wait) {
			return stopCause(ctx) // nil when cancelled or timed out: the run terminates, and TERMINATE saves again
		}
		wait = min(2*wait, checkpointMaxBackoff)
	}
}

// stopCause is the stop ending of a run whose context was ended to move it elsewhere, or nil.
func stopCause(ctx context.Context) *ending {
	if cause := context.Cause(ctx); errors.Is(cause, errHandOff) || errors.Is(cause, errLeaseLost) {
		return stopHere(cause.Error())
	}
	return nil
}

// errMoved is what a caller waiting on this replica gets when its run moved to another one.
func errMoved(runID string) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE,
		"run %q moved to another orchestrator replica (this one is shutting down): follow it with WatchRun, read it with GetRun, or retry Run with the same idempotency_key", runID)
}

// isDraining reports whether the replica is shutting down.
func (s *Service) isDraining() bool {
	select {
	case <-s.draining:
		return true
	default:
		return false
	}
}

// publishContext is the context a run's events are published in: ctx's values (the trace),
// but not its cancellation, so a cancelled or timed-out run still publishes every event it
// makes; publishing ends only when the replica gives up on its runs at the end of a drain.
func (r *run) publishContext(ctx context.Context) context.Context {
	return detached{Context: context.WithoutCancel(ctx), until: r.svc.abandon}
}

// detached is a context with the values of one context and the lifetime of another.
//
// A context derived from it (a publish's timeout) is cancelled by until directly, as a child
// of until's: see Value.
type detached struct {
	context.Context                 // the values
	until           context.Context // the lifetime
}

func (d detached) Deadline() (time.Time, bool) { return d.until.Deadline() }
func (d detached) Done() <-chan struct{}       { return d.until.Done() }
func (d detached) Err() error                  { return d.until.Err() }

// Value is the value of key in the values' context, else in until's. until holds no values of
// its own, but the context package looks a parent's cancellation up among its values: finding
// until's, it registers a derived context with until. Without it, every context derived from a
// detached one started a goroutine to watch until, for as long as the derived context lived: one
// per event a run published, and 2.5% of the CPU of a wave of 10,000 runs (issue 15).
func (d detached) Value(key any) any {
	if v := d.Context.Value(key); v != nil {
		return v
	}
	return d.until.Value(key)
}

package orchestrator

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"golang.org/x/sync/errgroup"
)

// keep runs the replica's keeper until ctx ends: one goroutine beats its heartbeat, which
// keeps its runs its own, and another adopts the runs nobody owns (their owner died, or shut
// down and handed them off), each every third of the TTL. Adoption waits on slow requests
// (a store that is down) that must not hold the beats up.
func (s *Service) keep(ctx context.Context) {
	defer close(s.kept)
	var (
		wg sync.WaitGroup
		b  beats
	)
	rev := s.beat(ctx, 0, &b) // before the first adoption, which looks for its outcome
	wg.Go(func() { s.beatEvery(ctx, &b, rev) })
	wg.Go(func() { s.adoptEvery(ctx, &b) })
	wg.Wait()
}

// beats is what the beating goroutine tells the adopting one.
type beats struct {
	mu      sync.Mutex
	live    bool      // the last beat stored the heartbeat
	trouble time.Time // when a beat last failed or found the heartbeat lapsed; zero: never

	// lapsed is when a beat last found the heartbeat lapsed (zero: never), and watched whether
	// the checks after it (lapseWatch) are over; only the beating goroutine reads and writes
	// them, so mu does not guard them.
	lapsed  time.Time
	watched bool
}

// set records a beat: live when it stored the heartbeat, troubled when it failed or found the
// heartbeat lapsed.
func (b *beats) set(live, troubled bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live = live
	if troubled {
		b.trouble = time.Now()
	}
}

// suspect records trouble seen elsewhere: the store does not list this replica's heartbeat.
func (b *beats) suspect() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trouble = time.Now()
}

// steady reports whether the replica may adopt runs: its heartbeat is live, and has been beaten
// without trouble for ttl. After trouble (NATS down, or its store lost) the other replicas'
// heartbeats may be missing too, though they live: each beats again within a third of the TTL
// of NATS being back, and none is taken for dead before a TTL has passed.
func (b *beats) steady(ttl time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live && (b.trouble.IsZero() || time.Since(b.trouble) >= ttl)
}

// beatEvery beats the heartbeat after the one at rev every third of the TTL until ctx ends,
// and marks the replica draining while it drains (see Drain).
func (s *Service) beatEvery(ctx context.Context, b *beats, rev uint64) {
	tick := time.NewTicker(s.store.LeaseTTL() / 3)
	defer tick.Stop()
	for {
		if s.isDraining() {
			s.markDraining(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rev = s.beat(ctx, rev, b)
	}
}

// adoptEvery adopts the runs nobody owns every third of the TTL while the beats are steady,
// until ctx ends.
func (s *Service) adoptEvery(ctx context.Context, b *beats) {
	tick := time.NewTicker(s.store.LeaseTTL() / 3)
	defer tick.Stop()
	known := owners{}
	for pass := 0; ; pass++ {
		if b.steady(s.store.LeaseTTL()) && !s.adoptOrphans(ctx, known, pass) {
			b.suspect()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// beat beats the replica's heartbeat after the one at rev (0: the first), records it in b and
// returns the revision to beat after next. A heartbeat found lapsed is beaten again, and the
// runs other replicas took meanwhile stop here, at that beat and at every beat of the next
// lapseWatch: a keeper whose pass listed the live replicas while the heartbeat was missing
// may take a run after the first check; one another process beat is reported.
//
// A beat that stores the heartbeat renews the replica's lease (see lease); after a lapse, only
// once the runs other replicas took are stopped.
func (s *Service) beat(ctx context.Context, rev uint64, b *beats) uint64 {
	sent := time.Now()
	next, err := s.storeBeat(ctx, rev)
	if err == nil {
		b.set(true, false)
		s.lease.renew(sent.Add(s.store.LeaseTTL()))
		switch {
		case b.lapsed.IsZero() || b.watched:
		case time.Since(b.lapsed) < lapseWatch*s.store.LeaseTTL():
			s.dropLostRuns(ctx)
		default:
			b.watched = true
			s.log.DebugContext(ctx, "the checks after the heartbeat's lapse are over; the runs' events stay fenced")
		}
		return next
	}
	switch {
	case errors.Is(err, runstore.ErrNameTaken):
		// Nothing here can tell which of the two processes is right: both go on, and the
		// operator must rename one (AGENTMESH_REPLICA).
		s.log.ErrorContext(ctx, "another orchestrator process uses this replica's name: each takes the other's runs for its own; give every replica a unique AGENTMESH_REPLICA", "replica", s.replica)
	case !errors.Is(err, runstore.ErrConflict):
		s.log.WarnContext(ctx, "beating the replica's heartbeat failed", "err", err)
		b.set(false, true)
		return rev
	default:
		s.log.WarnContext(ctx, "this replica's heartbeat lapsed; checking that its runs are still its own")
		s.metrics.lapses.Add(ctx, 1)
		b.lapsed, b.watched = time.Now(), false
		s.lease.lapsed.Store(true)
	}
	b.set(false, true) // before the heartbeat is back, so that adoption never sees it steady
	sent = time.Now()
	if next, err = s.storeBeat(ctx, 0); err != nil {
		s.log.WarnContext(ctx, "beating the replica's heartbeat failed", "err", err)
		return 0
	}
	b.set(true, false)
	s.dropLostRuns(ctx)
	s.lease.renew(sent.Add(s.store.LeaseTTL()))
	return next
}

// storeBeat stores the replica's heartbeat after the one at rev (runstore.Store.Beat), waiting
// a third of the TTL at most: a beat whose request NATS lost while it reconnected is given up
// in time for the next beat to store the heartbeat before the TTL passes. The store's own
// bound of an attempt, 5 s, outlasts a short TTL: the other replicas, steady a TTL after NATS
// came back, took this live replica for dead and adopted its runs.
func (s *Service) storeBeat(ctx context.Context, rev uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.store.LeaseTTL()/3)
	defer cancel()
	return s.store.Beat(ctx, s.replica, rev)
}

// lapseWatch is for how many heartbeat TTLs after its heartbeat lapsed a replica checks at
// every beat that its runs are still its own. Another replica's keeper takes a run on what it
// listed at the start of its pass, which ends well within a TTL but for a store that is down
// (and then its take-overs fail).
const lapseWatch = 2

// ownerCheckers is how many runs' owners a replica reads at once after its heartbeat lapsed.
const ownerCheckers = 32

// dropLostRuns stops every run live here that another replica took (adopted while this
// replica's heartbeat had lapsed), or took, finished and retired: that run has no owner, and a
// tombstone. Such a run also stops at its next checkpoint, which conflicts with the new
// owner's; this stops a run that waits (on a model, an approval) too. A run without an owner
// nor a tombstone goes on: NATS lost its store, and the run's next checkpoint stores it again.
// (A run of this replica's own that is retiring has a tombstone too, and has finished.)
func (s *Service) dropLostRuns(ctx context.Context) {
	var g errgroup.Group
	g.SetLimit(ownerCheckers)
	for _, r := range s.liveRuns() {
		g.Go(func() error {
			owner, _, err := s.store.Owner(ctx, r.id)
			switch {
			case errors.Is(err, runstore.ErrNotFound):
				if retired, err := s.store.Taken(ctx, r.id); err == nil && retired {
					s.log.WarnContext(ctx, "run retired by another replica; it stops here",
						"run_id", r.id)
					r.cancel(errLeaseLost)
				}
			case err == nil && owner != s.replica:
				s.log.WarnContext(ctx, "run taken over by another replica; it stops here",
					"run_id", r.id, "owner", owner)
				r.cancel(errLeaseLost)
			}
			return nil
		})
	}
	_ = g.Wait()
}

// owners are the owners the keeper read of the runs that live replicas other than this one
// own, by run id, with the pass that read each. Such a run changes owner only once its owner's
// heartbeat is gone, or when its owner hands it off: while draining (marked so), or on its own,
// when it could not resume the run or save its result; its keeper then takes it back, but the
// run may need another replica (one of a newer release, during a deploy, for a checkpoint of a
// newer version). So the keeper reads the owner of a run again when the one it knows died or
// drains, and otherwise once every rereadPasses passes: a pass reads the owners of the runs that
// started since the last and a ninth of the others, not every run in flight's.
type owners map[string]ownerRead

// ownerRead is an owner the keeper read, in pass.
type ownerRead struct {
	owner string
	pass  int
}

// rereadPasses is how many passes the keeper trusts an owner it read.
const rereadPasses = 9

// markDraining marks this replica draining, so that the others read its runs' owners again
// and adopt those it handed off.
func (s *Service) markDraining(ctx context.Context) {
	if err := s.store.MarkDraining(ctx, s.replica); err != nil {
		s.log.WarnContext(ctx, "marking the replica draining failed", "err", err)
	}
}

// adoptOrphans takes over every unfinished run that no live replica owns and resumes it from
// its checkpoint: its owner's heartbeat is gone, or its owner handed it off. A run this replica
// owned before it restarted (same replica name) is taken back at once. Runs an earlier release
// started move over once their lease is gone (runstore's AdoptLegacy). known is updated with
// the owners read in pass; every sweepPasses passes it also sweeps the inputs of retired runs.
// It reports false, adopting nothing, when the store does not list this replica's own
// heartbeat, which it beat: the store lost it (NATS came back without its store) or it lapsed,
// and the other replicas' may be missing for the same reason.
func (s *Service) adoptOrphans(ctx context.Context, known owners, pass int) bool {
	if s.isDraining() {
		return true
	}
	alive, draining, err := s.store.Alive(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "listing live replicas failed", "err", err)
		return true
	}
	if !alive[s.replica] {
		return false
	}
	s.adoptLegacy(ctx)
	ids, err := s.store.Active(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "listing active runs failed", "err", err)
		return true
	}
	if pass%sweepPasses == 0 {
		s.sweepInputs(ctx)
	}
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
	}
	maps.DeleteFunc(known, func(id string, r ownerRead) bool { return !listed[id] || pass-r.pass >= rereadPasses })
	for _, id := range ids {
		if s.isDraining() || ctx.Err() != nil {
			return true
		}
		if s.ours(id) {
			continue
		}
		if r, ok := known[id]; ok && alive[r.owner] && !draining[r.owner] {
			continue // owned by a live replica, as read lately
		}
		delete(known, id)
		owner, rev, err := s.store.Owner(ctx, id)
		if err != nil {
			continue
		}
		var reason string
		switch {
		case owner == runstore.HandedOff:
			reason = runstore.HandedOff
		case owner == s.replica:
			reason = "replica restarted" // ours, from before a restart
		case !alive[owner]:
			// alive was listed before the owner was read: a replica that started since under
			// the dead one's name (a restart) may have beaten, then taken the run, in between.
			if beating, err := s.store.Beating(ctx, owner); err != nil || beating {
				continue
			}
			reason = "lease expired"
		default:
			known[id] = ownerRead{owner: owner, pass: pass}
			continue // owned by a live replica
		}
		if err := s.store.TakeOver(ctx, id, s.replica, rev); err != nil {
			continue // another replica was faster
		}
		s.adopt(ctx, id, reason)
	}
	return true
}

// sweepPasses is every how many passes the keeper sweeps the inputs of retired runs
// (sweepInputs): a few seconds with the default heartbeat TTL.
const sweepPasses = rereadPasses

// sweepInputs purges the inputs left for runs that have retired: an input whose writer stopped
// after writing it and before finding its run gone (runstore's SweepInputs). The inputs'
// bucket has no TTL, and every replica's watch replays what it holds.
func (s *Service) sweepInputs(ctx context.Context) {
	purged, err := s.store.SweepInputs(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "sweeping the inputs of retired runs failed", "err", err)
	}
	for _, id := range purged {
		s.log.InfoContext(ctx, "purged inputs left for a retired run", "run_id", id)
	}
}

// adoptLegacy moves the runs an earlier release left without an owner to this replica, and
// resumes them.
func (s *Service) adoptLegacy(ctx context.Context) {
	moved, err := s.store.AdoptLegacy(ctx, s.replica)
	if err != nil {
		s.log.WarnContext(ctx, "adopting runs of an earlier release failed", "err", err)
	}
	for id, reason := range moved {
		s.adopt(ctx, id, reason)
	}
}

// adopt resumes a run this replica just took over, or hands it off again when it cannot (the
// store failed, or the checkpoint is of a newer version than this replica reads); a run whose
// checkpoint cannot be read or restored ends instead (endUnreadable).
func (s *Service) adopt(ctx context.Context, id, reason string) {
	if err := s.resume(ctx, id, reason); err != nil {
		s.log.ErrorContext(ctx, "resuming a run failed", "run_id", id, "err", err)
		_ = s.store.HandOff(ctx, id, s.replica)
	}
}

// resume continues a run from its checkpoint on this replica, which owns it; a run this
// replica refused at its start is discarded instead (discardRefused).
func (s *Service) resume(ctx context.Context, runID string, reason string) error {
	if s.discardRefused(ctx, runID) {
		return nil
	}
	cp, head, err := s.store.Load(ctx, runID)
	if err != nil {
		if errors.Is(err, runstore.ErrUnreadable) {
			return s.endUnreadable(ctx, runID, reason, err)
		}
		if errors.Is(err, runstore.ErrNotFound) {
			_ = s.store.Retire(ctx, runID, nil) // an index entry without a checkpoint
			return nil
		}
		return err
	}
	if cp.GetPhase() == checkpointv1.Phase_PHASE_FINISHED && cp.GetResultSaved() {
		return s.store.Finish(ctx, cp, nil) // retired midway; or an earlier release's tombstone, which moves
	}
	if cp.GetPhase() == checkpointv1.Phase_PHASE_STARTED && cp.GetRequest().GetRunId() != "" {
		// A run whose caller was told its id is taken, and whose discarding failed.
		taken, err := s.store.Taken(ctx, runID)
		if err != nil {
			return err
		}
		if taken {
			return s.store.Discard(ctx, runID)
		}
	}
	r, runCtx, err := s.restoreRun(ctx, cp, head, reason)
	if errors.Is(err, runstore.ErrUnreadable) {
		return s.endUnreadable(ctx, runID, reason, err)
	}
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "resuming run", "run_id", runID, "phase", cp.GetPhase().String(), "turn", cp.GetTurns(), "reason", reason)
	s.metrics.runAdopted(ctx, reason)
	s.launch(runCtx, r)
	return nil
}

// endUnreadable ends a run whose checkpoint cannot be read back or restored (cause wraps
// runstore.ErrUnreadable): resuming it again, here or on another replica, cannot help, and
// handing it off would have the keepers take it over for ever while its callers wait. It ends
// OUTCOME_FAILED_VALIDATION / CHECKPOINT_UNREADABLE with what can be read of it (the
// checkpoint's small state; its id alone when even that does not decode), and is finished as
// a run found finished in its checkpoint is: its result saved to the memory stage,
// run_finished published after the run's last event, its records retired.
func (s *Service) endUnreadable(ctx context.Context, runID, reason string, cause error) error {
	st, err := s.store.State(ctx, runID)
	switch {
	case errors.Is(err, runstore.ErrUnreadable):
		st = &checkpointv1.RunCheckpoint{RunId: runID}
	case err != nil:
		return err
	}
	cp := &checkpointv1.RunCheckpoint{
		RunId: runID, UserId: st.GetUserId(), Phase: checkpointv1.Phase_PHASE_FINISHED,
		Traceparent: st.GetTraceparent(), Tracestate: st.GetTracestate(),
		StartedAt: st.GetStartedAt(), Resumes: st.GetResumes(), EventSeq: st.GetEventSeq(),
		Result: unreadableResult(st, cause, s.now()),
	}
	r, runCtx, err := s.restoreRun(ctx, cp, nil, reason)
	if err != nil {
		return err
	}
	s.log.ErrorContext(ctx, "a run's checkpoint cannot be read; the run ends",
		"run_id", runID, "err", cause)
	outcome := cp.GetResult().GetOutcome().String()
	s.metrics.runFinished(ctx, outcome, ExitCheckpointUnreadable, st.GetTurns())
	s.launch(runCtx, r)
	return nil
}

// unreadableResult is the result of a run whose checkpoint cannot be read (endUnreadable): what
// its small state st holds, and an error naming err, the cause; its report is dated at.
func unreadableResult(st *checkpointv1.RunCheckpoint, err error, at time.Time) *typev1.RunResult {
	return &typev1.RunResult{
		RunId: st.GetRunId(), Outcome: typev1.Outcome_OUTCOME_FAILED_VALIDATION,
		ExitReason: ExitCheckpointUnreadable, TraceId: traceIDOf(st.GetTraceparent()),
		Usage: st.GetUsage(), Turns: st.GetTurns(), ToolCalls: st.GetToolCalls(),
		Decision: st.GetDecision(),
		Error: &typev1.RunError{Code: ExitCheckpointUnreadable, Message: "the run's stored " +
			"checkpoint cannot be read, so the run cannot go on: " + err.Error()},
		FinalReport: failedReport(typev1.OutputFormat_OUTPUT_FORMAT_TEXT, MessageProviderFailure,
			strings.ToLower(ExitCheckpointUnreadable), at),
	}
}

package orchestrator

import (
	"context"
	"errors"
	"maps"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"golang.org/x/sync/errgroup"
)

// keep beats this replica's heartbeat, which keeps its runs its own, and adopts the runs
// nobody owns (their owner died, or shut down and handed them off), every third of the TTL,
// until ctx ends. A beat that finds the heartbeat lapsed adopts nothing in that pass: other
// replicas' heartbeats may have lapsed with it (NATS was down for a TTL), and they beat again
// within the pass. A draining replica marks itself draining every pass too (see Drain).
func (s *Service) keep(ctx context.Context) {
	defer close(s.kept)
	tick := time.NewTicker(s.store.LeaseTTL() / 3)
	defer tick.Stop()
	var (
		rev   uint64 // the last beat's revision
		adopt bool
		known = owners{}
	)
	for pass := 0; ; pass++ {
		if rev, adopt = s.beat(ctx, rev); adopt {
			s.adoptOrphans(ctx, known, pass)
		}
		if s.isDraining() {
			s.markDraining(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// beat beats the replica's heartbeat after the one at rev (0: the first) and returns the
// revision to beat after next; adopt reports whether the replica may adopt runs in this pass:
// not when the beat failed, nor when the heartbeat had lapsed, in which case the runs other
// replicas took meanwhile stop here, nor when another process beat this replica's name.
func (s *Service) beat(ctx context.Context, rev uint64) (next uint64, adopt bool) {
	next, err := s.store.Beat(ctx, s.replica, rev)
	if err == nil {
		return next, true
	}
	switch {
	case errors.Is(err, runstore.ErrNameTaken):
		// Nothing here can tell which of the two processes is right: both go on, and the
		// operator must rename one (AGENTMESH_REPLICA).
		s.log.ErrorContext(ctx, "another orchestrator process uses this replica's name: each takes the other's runs for its own; give every replica a unique AGENTMESH_REPLICA", "replica", s.replica)
	case !errors.Is(err, runstore.ErrConflict):
		s.log.WarnContext(ctx, "beating the replica's heartbeat failed", "err", err)
		return rev, false
	default:
		s.log.WarnContext(ctx, "this replica's heartbeat lapsed; checking that its runs are still its own")
		s.metrics.lapses.Add(ctx, 1)
	}
	if next, err = s.store.Beat(ctx, s.replica, 0); err != nil {
		s.log.WarnContext(ctx, "beating the replica's heartbeat failed", "err", err)
		return 0, false
	}
	s.dropLostRuns(ctx)
	return next, false
}

// ownerCheckers is how many runs' owners a replica reads at once after its heartbeat lapsed.
const ownerCheckers = 32

// dropLostRuns stops every run live here that another replica took (adopted while this
// replica's heartbeat had lapsed). Such a run also stops at its next checkpoint, which
// conflicts with the new owner's; this stops a run that waits (on a model, an approval) too.
func (s *Service) dropLostRuns(ctx context.Context) {
	var g errgroup.Group
	g.SetLimit(ownerCheckers)
	for _, r := range s.liveRuns() {
		g.Go(func() error {
			if owner, _, err := s.store.Owner(ctx, r.id); err == nil && owner != s.replica {
				s.log.WarnContext(ctx, "run taken over by another replica; it stops here", "run_id", r.id, "owner", owner)
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
// the owners read in pass.
func (s *Service) adoptOrphans(ctx context.Context, known owners, pass int) {
	if s.isDraining() {
		return
	}
	s.adoptLegacy(ctx)
	alive, draining, err := s.store.Alive(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "listing live replicas failed", "err", err)
		return
	}
	ids, err := s.store.Active(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "listing active runs failed", "err", err)
		return
	}
	listed := make(map[string]bool, len(ids))
	for _, id := range ids {
		listed[id] = true
	}
	maps.DeleteFunc(known, func(id string, r ownerRead) bool { return !listed[id] || pass-r.pass >= rereadPasses })
	for _, id := range ids {
		if s.isDraining() || ctx.Err() != nil {
			return
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

// adopt resumes a run this replica just took over, or hands it off again when it cannot.
func (s *Service) adopt(ctx context.Context, id, reason string) {
	if err := s.resume(ctx, id, reason); err != nil {
		s.log.ErrorContext(ctx, "resuming a run failed", "run_id", id, "err", err)
		_ = s.store.HandOff(ctx, id, s.replica)
	}
}

// resume continues a run from its checkpoint on this replica, which owns it.
func (s *Service) resume(ctx context.Context, runID string, reason string) error {
	cp, head, err := s.store.Load(ctx, runID)
	if err != nil {
		if errors.Is(err, runstore.ErrNotFound) {
			_ = s.store.Retire(ctx, runID, nil) // an index entry without a checkpoint
			return nil
		}
		return err
	}
	if cp.GetPhase() == checkpointv1.Phase_PHASE_FINISHED && cp.GetResultSaved() {
		return s.store.Retire(ctx, runID, nil)
	}
	r, runCtx, err := s.restoreRun(ctx, cp, head, reason)
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "resuming run", "run_id", runID, "phase", cp.GetPhase().String(), "turn", cp.GetTurns(), "reason", reason)
	s.metrics.runAdopted(ctx, reason)
	s.launch(runCtx, r)
	return nil
}

package orchestrator

import (
	"context"
	"errors"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"golang.org/x/sync/errgroup"
)

// keep renews the leases of the runs this replica owns and adopts runs nobody owns (their
// owner died, or shut down and handed them off), every third of the lease TTL, until ctx ends.
func (s *Service) keep(ctx context.Context) {
	defer close(s.kept)
	tick := time.NewTicker(s.store.LeaseTTL() / 3)
	defer tick.Stop()
	for {
		s.adoptOrphans(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.renewLeases(ctx)
	}
}

// leaseRenewers is how many leases a replica renews at once. Renewing the leases of thousands
// of runs one at a time took about as long as the lease TTL when NATS was busy (9.4 s for 2,640
// runs during a wave of 10,000, with a TTL of 10 s), so that a run's lease could expire
// between two of its renewals.
const leaseRenewers = 32

// renewLeases extends the leases this replica holds, leaseRenewers at a time; a run whose lease
// another replica took stops here at once. A lease taken or renewed less than a sixth of the
// TTL ago is left for the next pass, a third of the TTL later: a lease is renewed at most half
// the TTL after it was taken, besides the time the passes take, and a run that ends sooner is
// never renewed.
func (s *Service) renewLeases(ctx context.Context) {
	fresh := time.Now().Add(-s.store.LeaseTTL() / 6)
	var g errgroup.Group
	g.SetLimit(leaseRenewers)
	for _, r := range s.liveRuns() {
		r.mu.Lock()
		rev, at := r.leaseRev, r.leasedAt
		r.mu.Unlock()
		if rev == 0 || at.After(fresh) {
			continue
		}
		g.Go(func() error {
			s.renewLease(ctx, r, rev)
			return nil
		})
	}
	_ = g.Wait()
}

// renewLease extends r's lease, held at revision rev.
func (s *Service) renewLease(ctx context.Context, r *run, rev uint64) {
	next, err := s.store.Renew(ctx, r.id, s.replica, rev)
	switch {
	case err == nil:
		r.mu.Lock()
		if r.leaseRev == rev {
			r.leaseRev, r.leasedAt = next, time.Now()
		}
		r.mu.Unlock()
	case errors.Is(err, runstore.ErrConflict):
		s.log.WarnContext(ctx, "lease lost; the run stops here", "run_id", r.id)
		r.mu.Lock()
		r.leaseRev = 0
		r.mu.Unlock()
		r.cancel(errLeaseLost)
	default:
		s.log.WarnContext(ctx, "renewing a lease failed", "run_id", r.id, "err", err)
	}
}

// adoptOrphans takes over every unfinished run that no replica owns: it acquires the run's
// lease and resumes the run from its checkpoint. A run this replica owned before it restarted
// (same replica name, lease not yet expired) is taken back at once.
func (s *Service) adoptOrphans(ctx context.Context) {
	if s.isDraining() {
		return
	}
	ids, err := s.store.Active(ctx)
	if err != nil {
		s.log.WarnContext(ctx, "listing active runs failed", "err", err)
		return
	}
	for _, id := range ids {
		if s.isDraining() || ctx.Err() != nil {
			return
		}
		if s.ours(id) {
			continue
		}
		holder, rev, err := s.store.Holder(ctx, id)
		reason := "lease expired"
		switch {
		case errors.Is(err, runstore.ErrNotFound):
		case err != nil:
			continue
		case holder == s.replica:
			reason = "replica restarted" // our own lease, from before a restart
			if err := s.store.Release(ctx, id, rev); err != nil {
				continue
			}
		default:
			continue // owned by a live replica
		}
		leaseRev, err := s.store.Acquire(ctx, id, s.replica)
		if err != nil {
			continue // another replica was faster
		}
		// Read once the run is ours: a hand-off notes it before it releases the lease.
		if note, err := s.store.NoteOf(ctx, id); err == nil && note == runstore.HandedOff {
			reason = runstore.HandedOff
		}
		if err := s.store.Note(ctx, id, s.replica); err != nil {
			s.log.WarnContext(ctx, "noting a run's new owner failed", "run_id", id, "err", err)
		}
		if err := s.resume(ctx, id, leaseRev, reason); err != nil {
			s.log.ErrorContext(ctx, "resuming a run failed", "run_id", id, "err", err)
			_ = s.store.Release(ctx, id, leaseRev)
		}
	}
}

// resume continues a run from its checkpoint on this replica, holding its lease.
func (s *Service) resume(ctx context.Context, runID string, leaseRev uint64, reason string) error {
	cp, head, err := s.store.Load(ctx, runID)
	if err != nil {
		if errors.Is(err, runstore.ErrNotFound) {
			_ = s.store.Retire(ctx, runID, nil) // an index entry without a checkpoint
			return nil
		}
		return err
	}
	if cp.GetPhase() == checkpointv1.Phase_PHASE_FINISHED && cp.GetResultSaved() {
		if err := s.store.Retire(ctx, runID, nil); err != nil {
			return err
		}
		return s.store.Release(ctx, runID, leaseRev)
	}
	r, runCtx, err := s.restoreRun(ctx, cp, head, leaseRev, reason)
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "resuming run", "run_id", runID, "phase", cp.GetPhase().String(), "turn", cp.GetTurns(), "reason", reason)
	s.launch(runCtx, r)
	return nil
}

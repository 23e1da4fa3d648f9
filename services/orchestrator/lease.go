package orchestrator

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
)

// lease is how long this replica's runs are surely its own: until the heartbeat its keeper
// last stored expires, at the earliest the TTL after the beat was sent. Another replica adopts
// a run only once its owner's heartbeat is gone (or its owner handed it off), so until then no
// other replica runs this replica's runs. A run publishes its events only while the lease
// holds (awaitLease): a replica that stalled for longer (a process frozen, a host suspended,
// NATS out of reach) publishes nothing more for a run until its keeper has beaten again and
// stopped the runs other replicas took meanwhile (dropLostRuns). Its checkpoints need no
// lease, as the store refuses a checkpoint written over another replica's.
//
// Once its heartbeat has lapsed, a replica also fences its runs' events (fence): another
// replica's keeper that listed the replicas while the heartbeat was missing may take a run
// later than the checks after the lapse look (lapseWatch).
type lease struct {
	mu      sync.Mutex
	until   time.Time     // zero until the first beat
	renewed chan struct{} // closed and replaced by renew
	lapsed  atomic.Bool   // the heartbeat lapsed once: the runs' events are fenced
}

func newLease() *lease { return &lease{renewed: make(chan struct{})} }

// renew extends the lease to until, the time a beat that stored the heartbeat was sent plus
// the heartbeat's TTL, and wakes the runs waiting for it.
func (l *lease) renew(until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = until
	close(l.renewed)
	l.renewed = make(chan struct{})
}

// held reports whether the lease holds at now, and returns a channel closed at its next
// renewal.
func (l *lease) held(now time.Time) (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.Before(l.until), l.renewed
}

// awaitLease waits until this replica's lease holds (see lease), and reports whether the run
// may then publish: not once it was lost or handed off (its context says so), nor when the
// replica gave up waiting (a drain's time is up). A run that is not durable publishes at once.
func (r *run) awaitLease(ctx context.Context) bool {
	if r.svc.store == nil {
		return true
	}
	for {
		ok, renewed := r.svc.lease.held(time.Now())
		if ok {
			return ctx.Err() == nil || stopCause(ctx) == nil
		}
		select {
		case <-renewed:
		case <-r.svc.abandon.Done():
			return false
		}
	}
}

// fence fences a durable run's events with its owner in the store (events.WithOwner) once
// the replica's heartbeat has lapsed: an executor that finds another replica's event after
// its own last one publishes nothing more when the store names another owner. That closes
// what the lease and the checks after a lapse leave open: a run another replica's keeper took
// later than lapseWatch. Fencing costs some 2% of a lone turn, so a replica whose heartbeat
// never lapsed, whose runs no keeper takes, does not fence; what is left open then is a
// replica that stalls right between a run's check of its lease and the event's publish. The
// option is made once, for every run of the replica.
func (s *Service) fence() events.RunOption {
	return events.WithOwner(func(ctx context.Context, runID string) (bool, error) {
		owner, _, err := s.store.Owner(ctx, runID)
		if errors.Is(err, runstore.ErrNotFound) {
			return false, nil // retired, or never this replica's
		}
		return owner == s.replica, err
	}, s.lease.lapsed.Load)
}

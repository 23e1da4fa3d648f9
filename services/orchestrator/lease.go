package orchestrator

import (
	"context"
	"sync"
	"time"
)

// lease is how long this replica's runs are surely its own: until the heartbeat its keeper
// last stored expires, at the earliest the TTL after the beat was sent. Another replica adopts
// a run only once its owner's heartbeat is gone (or its owner handed it off), so until then no
// other replica runs this replica's runs. A run publishes its events only while the lease
// holds (awaitLease): a replica that stalled for longer (a process frozen, a host suspended,
// NATS out of reach) publishes nothing more for a run until its keeper has beaten again and
// stopped the runs other replicas took meanwhile (dropLostRuns). Its checkpoints need no
// lease, as the store refuses a checkpoint written over another replica's.
type lease struct {
	mu      sync.Mutex
	until   time.Time     // zero until the first beat
	renewed chan struct{} // closed and replaced by renew
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

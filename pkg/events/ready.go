package events

import "sync"

// readiness is whether events can be stored right now: the connection is up, and the last
// attempt to store since it came up (a publish, or a probe of the stream) succeeded.
type readiness struct {
	mu        sync.Mutex
	connected bool
	stored    bool
	changed   chan struct{} // closed when ready's answer changes; nil until asked for
}

// get reports whether events can be stored now and returns a channel that is closed when
// that changes.
func (r *readiness) get() (bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	return r.ready(), r.changed
}

// setConnected records whether the connection is up. A connection that goes down also
// forgets the last outcome: once it is up again, events are storable only after a new
// success.
func (r *readiness) setConnected(connected bool) {
	r.update(func() {
		r.connected = connected
		if !connected {
			r.stored = false
		}
	})
}

// setStored records the outcome of an attempt to store. A success while the connection is
// down is ignored: it says nothing of the connection to come.
func (r *readiness) setStored(ok bool) {
	r.update(func() {
		if r.connected || !ok {
			r.stored = ok
		}
	})
}

// update applies change and signals waiters when ready's answer changed.
func (r *readiness) update(change func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := r.ready()
	change()
	if r.ready() != was && r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// ready is whether events can be stored now; r.mu is held.
func (r *readiness) ready() bool { return r.connected && r.stored }

package action

import (
	"sync"

	"github.com/nats-io/nats.go"
)

// connHealth follows whether a NATS connection is up, for the health of what needs it. It
// starts following on the first call of serving, and stops when the connection closes.
type connHealth struct {
	nc      *nats.Conn
	once    sync.Once
	mu      sync.Mutex
	up      bool
	changed chan struct{} // closed when up changes, then replaced
}

// serving reports whether the connection is up and returns a channel that is closed when that
// may have changed.
func (h *connHealth) serving() (bool, <-chan struct{}) {
	h.once.Do(h.follow)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up, h.changed
}

// follow records the connection's state and keeps it up to date until the connection closes.
func (h *connHealth) follow() {
	h.changed = make(chan struct{})
	statuses := h.nc.StatusChanged() // before reading the state: no change goes unseen
	h.set(h.nc.IsConnected())
	if h.nc.IsClosed() {
		h.nc.RemoveStatusListener(statuses)
		return
	}
	go func() {
		defer h.nc.RemoveStatusListener(statuses)
		for range statuses {
			status := h.nc.Status()
			h.set(status == nats.CONNECTED)
			if status == nats.CLOSED {
				return
			}
		}
	}()
}

// set records whether the connection is up, signalling the waiters when that changed.
func (h *connHealth) set(up bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if up != h.up {
		h.up = up
		close(h.changed)
		h.changed = make(chan struct{})
	}
}

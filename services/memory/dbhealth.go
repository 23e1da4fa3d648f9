package memory

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"
)

// How a PostgreSQL store follows whether its database answers (SQLStore.Serving).
const (
	// PingInterval is how often the store asks its database.
	PingInterval = time.Second
	// PingTimeout bounds one question: a database that takes longer does not answer.
	PingTimeout = 2 * time.Second
)

// dbHealth follows whether a database answers, asking it every PingInterval from the first
// call of serving until close.
type dbHealth struct {
	db     *sql.DB
	ctx    context.Context
	cancel context.CancelFunc
	start  sync.Once
	done   chan struct{} // closed when the prober has returned, or will never start

	mu      sync.Mutex
	up      bool
	changed chan struct{} // closed when up changes, then replaced
}

// newDBHealth follows db, which answered when the store opened.
func newDBHealth(db *sql.DB) *dbHealth {
	h := &dbHealth{db: db, done: make(chan struct{}), up: true, changed: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// serving reports whether the database answered its last question and returns a channel that
// is closed when that may have changed.
func (h *dbHealth) serving() (bool, <-chan struct{}) {
	h.start.Do(func() { go h.probe() })
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up, h.changed
}

// probe asks the database every PingInterval until close.
func (h *dbHealth) probe() {
	defer close(h.done)
	tick := time.NewTicker(PingInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-h.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(h.ctx, PingTimeout)
		err := h.db.PingContext(ctx)
		cancel()
		if h.ctx.Err() != nil {
			return
		}
		h.set(err)
	}
}

// set records the answer of the database (err nil: it answered), signalling the waiters when
// that changed.
func (h *dbHealth) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if up := err == nil; up != h.up {
		if !up {
			slog.Warn("the memory store's database does not answer", "error", err)
		}
		h.up = up
		close(h.changed)
		h.changed = make(chan struct{})
	}
}

// close stops following the database and waits for the prober to return.
func (h *dbHealth) close() {
	h.start.Do(func() { close(h.done) }) // never started: it never will
	h.cancel()
	<-h.done
}

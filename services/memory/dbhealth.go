package memory

import (
	"context"
	"database/sql"
	"errors"
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
	// schemaTimeout bounds the schema transaction of one attempt to create the schema of a
	// store whose database did not answer when it opened; the concurrent index builds that
	// follow it are not bounded (a large table's take longer, and one cut off starts again).
	schemaTimeout = 30 * time.Second
)

// dbHealth follows whether a database answers, asking it every PingInterval from the first
// call of serving (or, when the store has yet to set its database up, from the start) until
// close.
type dbHealth struct {
	db     *sql.DB
	ctx    context.Context
	cancel context.CancelFunc
	start  sync.Once
	done   chan struct{} // closed when the prober has returned, or will never start
	// setup, while not nil, runs after each answer of the database, which is up only once it
	// succeeds; the prober's alone, nil once it succeeded or when there is nothing to set up.
	// It bounds its own steps: its context ends only with close.
	setup func(context.Context) error
	// failed yields the *IndexError setup failed with, and is closed, once the database is
	// down for good and the prober has returned.
	failed chan error

	mu      sync.Mutex
	up      bool
	changed chan struct{} // closed when up changes, then replaced
}

// newDBHealth follows db, which answered when the store opened.
func newDBHealth(db *sql.DB) *dbHealth {
	h := &dbHealth{db: db, done: make(chan struct{}), up: true, changed: make(chan struct{}),
		failed: make(chan error, 1)}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// newDBHealthAfter follows db, which did not answer when the store opened: it is down, and
// asked from now on, until it answers and setup (creating the store's schema) succeeds.
func newDBHealthAfter(db *sql.DB, setup func(context.Context) error) *dbHealth {
	h := newDBHealth(db)
	h.up, h.setup = false, setup
	h.start.Do(func() { go h.probe() })
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
		if err == nil && h.setup != nil {
			err = h.setUp()
		}
		if h.ctx.Err() != nil {
			return
		}
		if ierr := (*IndexError)(nil); errors.As(err, &ierr) {
			slog.Error("the memory store's schema cannot be upgraded: serving nothing", "error", err)
			h.set(err)
			h.failed <- err
			close(h.failed)
			return
		}
		h.set(err)
	}
}

// setUp runs setup once, forgetting it when it succeeds.
func (h *dbHealth) setUp() error {
	if err := h.setup(h.ctx); err != nil {
		return err
	}
	h.setup = nil
	slog.Info("the memory store's database answers: its schema is ready")
	return nil
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

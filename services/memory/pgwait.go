package memory

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// DefaultIndexWaitWarning is how long a concurrent index build of a PostgreSQL store waits for
// other sessions' transactions before the store warns which, and how often it warns again
// while the build waits, when WithIndexWaitWarning does not say.
const DefaultIndexWaitWarning = 10 * time.Second

// WithIndexWaitWarning sets how long a concurrent index build of a PostgreSQL store (CREATE
// INDEX CONCURRENTLY, which waits for every transaction that wrote to its table before it
// began, then for every transaction whose snapshot is older than its own, in the whole
// database) may wait for other sessions before the store warns which build waits and for which
// backends, and how often it warns again while the build waits: a transaction left open
// elsewhere keeps the replica from serving for as long. 0 (or less) means
// DefaultIndexWaitWarning.
func WithIndexWaitWarning(d time.Duration) StoreOption {
	return func(o *storeOptions) { o.indexWaitWarning = d }
}

// blockersQuery lists the backends that the backend $1 waits for, oldest transaction first:
// each one's pid, state, how long its transaction has been open (in seconds) and application
// name (its client's, when it set one), with the phase of $1's index build; never their query,
// which may hold user data. A session of another role shows its pid alone, unless the store's
// role may read every session's statistics (pg_read_all_stats).
const blockersQuery = `SELECT a.pid, a.state, EXTRACT(EPOCH FROM now() - a.xact_start)::float8,
	a.application_name, (SELECT phase FROM pg_stat_progress_create_index WHERE pid = $1)
FROM pg_stat_activity a
WHERE a.pid = ANY(pg_blocking_pids($1))
ORDER BY a.xact_start NULLS LAST, a.pid`

// watchIndexBuild follows the concurrent build of ix by the backend pid, asking db once per
// interval (every) whether the build waits for other backends, and warning which each time it
// does. stop ends the watch and waits for it to return.
func watchIndexBuild(ctx context.Context, db *sql.DB, ix index, pid int,
	every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			warnIfWaiting(ctx, db, ix, pid, time.Since(start))
		}
	}()
	return func() { cancel(); <-done }
}

// warnIfWaiting warns when the backend pid, building ix for the time took so far, waits for
// other backends, naming them; when db cannot tell (no connection free in its pool, say), it
// warns that the build is still running, without them.
func warnIfWaiting(ctx context.Context, db *sql.DB, ix index, pid int, took time.Duration) {
	qctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	backends, phase, err := blockers(qctx, db, pid)
	attrs := []any{"index", ix.name, "table", ix.table, "build_pid", pid,
		"building_for", took.Round(time.Millisecond)}
	switch {
	case ctx.Err() != nil: // the build is over
	case err != nil:
		slog.Warn("a concurrent index build of the memory store is still running, the replica "+
			"serving nothing until it is built; what it waits for, if anything, is unknown",
			append(attrs, "error", err)...)
	case len(backends) > 0:
		slog.Warn("a concurrent index build of the memory store waits for other sessions' "+
			"transactions to end, the replica serving nothing until it is built",
			append(attrs, "phase", phase, "backends", strings.Join(backends, "; "))...)
	}
}

// blockers returns the backends the backend pid waits for, described (blockersQuery), and the
// phase of its index build.
func blockers(ctx context.Context, db *sql.DB, pid int) (backends []string, phase string, err error) {
	rows, err := db.QueryContext(ctx, blockersQuery, pid)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var (
			blocker        int
			state, app, ph sql.NullString
			open           sql.NullFloat64
			stateText      = "state unknown (a session of another role)"
			aged           = "transaction open for an unknown time"
		)
		if err := rows.Scan(&blocker, &state, &open, &app, &ph); err != nil {
			return nil, "", err
		}
		if state.Valid {
			stateText = state.String
		}
		if open.Valid {
			aged = "transaction open " +
				time.Duration(open.Float64*float64(time.Second)).Round(time.Millisecond).String()
		}
		desc := fmt.Sprintf("pid %d (%s, %s", blocker, stateText, aged)
		if app.String != "" {
			desc += fmt.Sprintf(", application %q", app.String)
		}
		backends = append(backends, desc+")")
		phase = ph.String
	}
	return backends, phase, rows.Err()
}

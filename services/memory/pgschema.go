package memory

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The schema upgrade of a PostgreSQL store.
//
// A plain CREATE INDEX holds its table's SHARE lock until its transaction ends, which stops
// every INSERT, UPDATE and DELETE of the table meanwhile: built in the schema transaction on a
// large table, a new index stopped the writes of every replica for as long as it built. So on
// PostgreSQL the schema transaction makes only the indexes of the tables it creates (empty, and
// no other session's yet), and the indexes of the tables that existed, when missing, are built
// after it commits with CREATE INDEX CONCURRENTLY, outside any transaction, which writes do not
// wait for. A build cut off (a crash, a cancelled statement) leaves its index INVALID, which
// IF NOT EXISTS would take for done: an invalid index is dropped (DROP INDEX CONCURRENTLY) and
// built again.
//
// Replicas upgrade one at a time, under the advisory lock schemaLockKey, held by the session
// of one connection (advisory transaction locks end with the schema transaction, before the
// builds) from before the schema transaction to after the last build. A replica waiting for it
// asks with pg_try_advisory_lock every so often rather than waiting in pg_advisory_lock: a
// statement waiting for a lock holds its snapshot, and CREATE INDEX CONCURRENTLY waits for every
// transaction whose snapshot is older than its own, so the waiter and the build would wait for
// each other (a deadlock, which PostgreSQL breaks by failing one of them).
//
// The releases before took the same key with pg_advisory_xact_lock in their schema transaction,
// so a replica of one that starts during a build waits for it, holding no lock on the tables;
// but it waits in pg_advisory_xact_lock, and PostgreSQL may break that wait as a deadlock with
// the build: the replica's start fails (it tries again), or the build does (it is dropped and
// built again at the next try).

// schemaLockKey is the advisory lock that serialises the schema upgrades of the replicas
// sharing a database (pg_try_advisory_lock's bigint key).
const schemaLockKey = 7007

// schemaLockWait is how long OpenPostgres waits for another replica's schema upgrade before it
// leaves its own to the background (not Serving until it is done): an upgrade that builds an
// index of a large table takes as long as the build, far longer than a start may. A variable
// for the tests.
var schemaLockWait = 5 * time.Second

// errSchemaBusy is the error of a schema upgrade that did not get the schema lock in time.
var errSchemaBusy = errors.New("another replica is upgrading the schema (it holds the schema lock)")

// postgresTables returns the names of the tables of the current schema, where the store's are.
func postgresTables(ctx context.Context, tx *sql.Tx) (map[string]bool, error) {
	return queryNames(ctx, tx, `SELECT table_name FROM information_schema.tables
WHERE table_schema = current_schema()`)
}

// openPostgresSchema is OpenPostgres's schema step: under the schema lock, waited for up to
// schemaLockWait (errSchemaBusy after), the schema transaction (migrate), reporting whether an
// index of a table that existed is missing or invalid, to be built concurrently (createSchema,
// in the background).
func (s *SQLStore) openPostgresSchema(ctx context.Context) (build []string, err error) {
	err = s.withSchemaLock(ctx, schemaLockWait, func(conn *sql.Conn) error {
		return inTxOf(ctx, conn, func(tx *sql.Tx) error {
			later, err := s.migrate(ctx, tx)
			if err != nil {
				return err
			}
			for _, ix := range later {
				state, err := postgresIndexState(ctx, tx, ix.name)
				if err != nil {
					return err
				}
				if state != indexValid {
					build = append(build, ix.name)
				}
			}
			return nil
		})
	})
	return build, err
}

// upgradePostgres upgrades the schema under the schema lock, waited for until ctx ends: the
// schema transaction (migrate), bounded by txTimeout when it is not 0, then the builds, one at a
// time, of the indexes that are missing or invalid (buildPostgresIndex), which only ctx bounds.
func (s *SQLStore) upgradePostgres(ctx context.Context, txTimeout time.Duration) error {
	return s.withSchemaLock(ctx, 0, func(conn *sql.Conn) error {
		txCtx, cancel := ctx, context.CancelFunc(func() {})
		if txTimeout > 0 {
			txCtx, cancel = context.WithTimeout(ctx, txTimeout)
		}
		err := inTxOf(txCtx, conn, func(tx *sql.Tx) error {
			_, err := s.migrate(txCtx, tx)
			return err
		})
		cancel()
		if err != nil {
			return err
		}
		for _, ix := range indexes {
			if err := s.buildPostgresIndex(ctx, conn, ix); err != nil {
				return err
			}
		}
		return nil
	})
}

// withSchemaLock runs fn on a connection of its own whose session holds the schema lock,
// waiting for it up to wait (0: until ctx ends; errSchemaBusy after). The lock is released
// after fn; a connection on which that fails is closed, ending its session and the lock with
// it, rather than going back to the pool with the lock.
func (s *SQLStore) withSchemaLock(ctx context.Context, wait time.Duration,
	fn func(*sql.Conn) error) (err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	locked := false
	defer func() {
		if locked {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), PingTimeout)
			var released bool
			uerr := conn.QueryRowContext(uctx, `SELECT pg_advisory_unlock($1)`, schemaLockKey).
				Scan(&released)
			cancel()
			if uerr != nil || !released {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
			}
		}
		if cerr := conn.Close(); cerr != nil && !errors.Is(cerr, sql.ErrConnDone) && err == nil {
			err = cerr
		}
	}()
	if err := lockSchema(ctx, conn, wait); err != nil {
		return err
	}
	locked = true
	return fn(conn)
}

// lockSchema takes the schema lock for conn's session, asking every so often (10 ms, doubling
// up to a second) until it gets it, ctx ends, or wait (when not 0) has passed.
func lockSchema(ctx context.Context, conn *sql.Conn, wait time.Duration) error {
	start, pause := time.Now(), 10*time.Millisecond
	for {
		var got bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, schemaLockKey).
			Scan(&got); err != nil {
			return err
		}
		if got {
			return nil
		}
		if wait > 0 && time.Since(start) >= wait {
			return errSchemaBusy
		}
		if pause == 10*time.Millisecond && wait == 0 {
			slog.Info("waiting for another replica's upgrade of the memory schema")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// indexState is what PostgreSQL's catalog says of an index of the current schema.
type indexState int

const (
	indexMissing indexState = iota
	indexInvalid            // a concurrent build of it was cut off, or is going on
	indexValid
)

// queryer runs queries: a transaction or a connection.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// postgresIndexState returns the state of the index name of the current schema: missing,
// invalid (pg_index.indisvalid false) or valid. Asking takes no lock on its table.
func postgresIndexState(ctx context.Context, q queryer, name string) (indexState, error) {
	var valid bool
	err := q.QueryRowContext(ctx, `SELECT i.indisvalid FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname = $1 AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())`,
		name).Scan(&valid)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return indexMissing, nil
	case err != nil:
		return 0, fmt.Errorf("read the state of index %s: %w", name, err)
	case !valid:
		return indexInvalid, nil
	}
	return indexValid, nil
}

// buildPostgresIndex builds ix on conn, outside any transaction, with CREATE INDEX
// CONCURRENTLY unless it is valid already; an invalid one, which a build cut off left, is
// dropped first. A unique index over rows that break its rule is an *IndexError, its invalid
// index dropped. While the build waits for other sessions' transactions, the store warns
// which every s.indexWaitWarning (watchIndexBuild). The caller holds the schema lock.
func (s *SQLStore) buildPostgresIndex(ctx context.Context, conn *sql.Conn, ix index) error {
	state, err := postgresIndexState(ctx, conn, ix.name)
	if err != nil || state == indexValid {
		return err
	}
	if state == indexInvalid {
		slog.Warn("an index whose build was cut off is invalid: dropping it to build it again",
			"index", ix.name)
		if err := dropPostgresIndex(ctx, conn, ix.name); err != nil {
			return err
		}
	}
	slog.Info("building an index of the memory store concurrently: writes go on meanwhile",
		"index", ix.name, "table", ix.table)
	var pid int
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return fmt.Errorf("build index %s: %w", ix.name, err)
	}
	start := time.Now()
	stopWatching := watchIndexBuild(ctx, s.db, ix, pid, s.indexWaitWarning)
	_, err = conn.ExecContext(ctx, ix.create(true))
	stopWatching()
	if err != nil {
		if pgErr := (*pgconn.PgError)(nil); ix.unique && errors.As(err, &pgErr) &&
			pgErr.Code == "23505" { // unique_violation
			ierr := &IndexError{Index: ix.name, Table: ix.table, Columns: ix.columns(),
				Rule: ix.rule, Err: err}
			ierr.Duplicates = countDuplicates(ctx, conn, ierr)
			// Left, the invalid index would cost writes (and refuse some, were it ready) for
			// nothing until the next try.
			if derr := dropPostgresIndex(context.WithoutCancel(ctx), conn, ix.name); derr != nil {
				slog.Warn("the invalid index of a failed build is left for the next start to drop",
					"index", ix.name, "error", derr)
			}
			return ierr
		}
		return fmt.Errorf("build index %s: %w", ix.name, err)
	}
	// IF NOT EXISTS skips an index of the name that another session made meanwhile, outside
	// the schema lock: it must be valid too.
	if state, err := postgresIndexState(ctx, conn, ix.name); err != nil || state != indexValid {
		return errors.Join(fmt.Errorf("index %s is not valid after its build", ix.name), err)
	}
	slog.Info("built an index of the memory store", "index", ix.name, "took", time.Since(start))
	return nil
}

// dropPostgresIndex drops the index name of the current schema concurrently (outside any
// transaction): writes to its table go on meanwhile.
func dropPostgresIndex(ctx context.Context, conn *sql.Conn, name string) error {
	var schema string
	if err := conn.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	_, err := conn.ExecContext(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+
		pgx.Identifier{schema, name}.Sanitize())
	if err != nil {
		return fmt.Errorf("drop the invalid index %s: %w", name, err)
	}
	return nil
}

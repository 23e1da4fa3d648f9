package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgresConnMaxIdleTime is how long a PostgreSQL store keeps a connection no call has used:
// a burst's connections are closed again once it has passed.
const PostgresConnMaxIdleTime = 5 * time.Minute

// DSNError is the error of OpenPostgres for a DSN that is empty or cannot be parsed (a
// postgres:// URL or key=value string it is not, a value out of range, a file it names that
// cannot be read): no wait for the database mends it.
type DSNError struct {
	// Err says what is wrong with the DSN (pgx redacts its password).
	Err error
}

// Error returns the store's message.
func (e *DSNError) Error() string { return "postgres memory store: " + e.Err.Error() }

// Unwrap returns the failure.
func (e *DSNError) Unwrap() error { return e.Err }

// OpenPostgres connects to the PostgreSQL database at dsn (a postgres:// URL or key=value
// string, as libpq takes them) as a Store and creates its schema when missing, in the
// connection's current schema (set search_path in the DSN to choose another). The store opens
// at most maxConns connections (at least 1) at once, a call beyond them waiting for a free
// one, so that a burst of calls does not open more than the server's max_connections; each
// is kept while used within PostgresConnMaxIdleTime. Concurrent opens of the same database
// are safe. The memories an earlier release indexed are indexed again in the background
// (SQLStore.ReindexTerms), once the schema is created and then every WithReindexInterval, by
// every replica (each passes over those no other one holds). Close the store when done. The
// store follows whether the database answers (Serving), for the memory stage's health.
//
// A database that does not answer, or in which the schema cannot be created, does not fail
// the open (only a DSN that cannot be parsed, a *DSNError, and a ctx that ends do): the store is not
// Serving, and its calls fail, until the database answers and the schema is created, tried
// every PingInterval from now on, so that the memory stage waits out the outage instead of
// exiting.
//
// Nor does an upgrade that builds indexes hold the open: an index a table made by an earlier
// release lacks (or one whose build was cut off, left invalid) is built concurrently, in the
// background, writes to the table going on meanwhile (pgschema.go), and so is the upgrade
// another replica holds the schema lock for beyond schemaLockWait; the store is not Serving
// until it is done. A unique index the stored rows break cannot be built: that is an
// *IndexError, which no wait mends, and Failed yields it.
func OpenPostgres(ctx context.Context, dsn string, maxConns int,
	opts ...StoreOption) (*SQLStore, error) {
	if dsn == "" {
		return nil, &DSNError{Err: errors.New("the DSN is empty")}
	}
	if maxConns < 1 {
		return nil, fmt.Errorf("postgres memory store: at most %d connections: want at least 1", maxConns)
	}
	cfg, err := pgx.ParseConfig(dsn) // a DSN that cannot be parsed never will: no waiting
	if err != nil {
		return nil, &DSNError{Err: err}
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(PostgresConnMaxIdleTime)
	o := newStoreOptions(opts)
	s := &SQLStore{db: db, d: postgresDialect, reindex: newReindexer(),
		indexWaitWarning: o.indexWaitWarning}
	pingCtx, cancel := context.WithTimeout(ctx, PingTimeout)
	err = db.PingContext(pingCtx)
	cancel()
	var build []string
	if err == nil {
		build, err = s.openPostgresSchema(ctx)
	}
	switch {
	case err == nil && len(build) == 0:
		s.health = newDBHealth(db)
		s.schemaReady()
	case ctx.Err() != nil:
		return nil, errors.Join(fmt.Errorf("postgres memory store: %w", err), db.Close())
	case err == nil:
		slog.Info("building indexes of the memory store concurrently (writes to its tables go "+
			"on): serving nothing until they are built", "indexes", build)
		s.health = newDBHealthAfter(db, s.createSchema)
	case errors.Is(err, errSchemaBusy):
		slog.Info("another replica is upgrading the memory schema: serving nothing until it " +
			"is done and the schema is ready")
		s.health = newDBHealthAfter(db, s.createSchema)
	default:
		slog.Warn("the memory store's database does not answer: serving nothing until it does "+
			"and the schema is created", "error", err)
		s.health = newDBHealthAfter(db, s.createSchema)
	}
	s.startReindexing(o.reindexInterval)
	return s, nil
}

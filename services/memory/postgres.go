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

// OpenPostgres connects to the PostgreSQL database at dsn (a postgres:// URL or key=value
// string, as libpq takes them) as a Store and creates its schema when missing, in the
// connection's current schema (set search_path in the DSN to choose another). The store opens
// at most maxConns connections (at least 1) at once, a call beyond them waiting for a free
// one, so that a burst of calls does not open more than the server's max_connections; each
// is kept while used within PostgresConnMaxIdleTime. Concurrent opens of the same database
// are safe. Close the store when done. The store follows whether the database answers
// (Serving), for the memory stage's health.
//
// A database that does not answer, or in which the schema cannot be created, does not fail
// the open (only a DSN that cannot be parsed and a ctx that ends do): the store is not
// Serving, and its calls fail, until the database answers and the schema is created, tried
// every PingInterval from now on, so that the memory stage waits out the outage instead of
// exiting.
func OpenPostgres(ctx context.Context, dsn string, maxConns int) (*SQLStore, error) {
	if dsn == "" {
		return nil, errors.New("postgres memory store: the DSN is empty")
	}
	if maxConns < 1 {
		return nil, fmt.Errorf("postgres memory store: at most %d connections: want at least 1", maxConns)
	}
	cfg, err := pgx.ParseConfig(dsn) // a DSN that cannot be parsed never will: no waiting
	if err != nil {
		return nil, fmt.Errorf("postgres memory store: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(PostgresConnMaxIdleTime)
	s := &SQLStore{db: db, d: postgresDialect}
	pingCtx, cancel := context.WithTimeout(ctx, PingTimeout)
	err = db.PingContext(pingCtx)
	cancel()
	if err == nil {
		err = s.createSchema(ctx)
	}
	switch {
	case err == nil:
		s.health = newDBHealth(db)
	case ctx.Err() != nil:
		return nil, errors.Join(fmt.Errorf("postgres memory store: %w", err), db.Close())
	default:
		slog.Warn("the memory store's database does not answer: serving nothing until it does "+
			"and the schema is created", "error", err)
		s.health = newDBHealthAfter(db, s.createSchema)
	}
	return s, nil
}

package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
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
func OpenPostgres(ctx context.Context, dsn string, maxConns int) (*SQLStore, error) {
	if dsn == "" {
		return nil, errors.New("postgres memory store: the DSN is empty")
	}
	if maxConns < 1 {
		return nil, fmt.Errorf("postgres memory store: at most %d connections: want at least 1", maxConns)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres memory store: %w", err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	db.SetConnMaxIdleTime(PostgresConnMaxIdleTime)
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("postgres memory store: %w", err), db.Close())
	}
	s, err := openSQL(ctx, db, postgresDialect)
	if err != nil {
		return nil, fmt.Errorf("postgres memory store: %w", err)
	}
	s.health = newDBHealth(db)
	return s, nil
}

package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// OpenPostgres connects to the PostgreSQL database at dsn (a postgres:// URL or key=value
// string, as libpq takes them) as a Store and creates its schema when missing, in the
// connection's current schema (set search_path in the DSN to choose another). Concurrent
// opens of the same database are safe. Close the store when done. The store follows whether
// the database answers (Serving), for the memory stage's health.
func OpenPostgres(ctx context.Context, dsn string) (*SQLStore, error) {
	if dsn == "" {
		return nil, errors.New("postgres memory store: the DSN is empty")
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres memory store: %w", err)
	}
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

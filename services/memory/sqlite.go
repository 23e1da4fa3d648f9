package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver (pure Go)
)

// sqliteBusyTimeoutMS is how long a write waits for another connection's write to finish.
const sqliteBusyTimeoutMS = 10000

// OpenSQLite opens (creating when missing) the SQLite database file at path as a Store,
// creates its schema when missing, and turns on write-ahead logging. The file's directory
// must exist. Writes take the database's write lock when their transaction begins (BEGIN
// IMMEDIATE), so concurrent writers queue instead of failing; Close the store when done.
func OpenSQLite(ctx context.Context, path string) (*SQLStore, error) {
	if path == "" {
		return nil, errors.New("sqlite memory store: the database path is empty")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite memory store: the database path %q must not contain '?'", path)
	}
	params := url.Values{
		"_pragma": {
			fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeoutMS),
			"journal_mode(WAL)",
			"synchronous(NORMAL)",
		},
		"_txlock": {"immediate"},
	}
	db, err := sql.Open("sqlite", path+"?"+params.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite memory store %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("sqlite memory store %s: %w", path, err), db.Close())
	}
	s, err := openSQL(ctx, db, sqliteDialect)
	if err != nil {
		return nil, fmt.Errorf("sqlite memory store %s: %w", path, err)
	}
	return s, nil
}

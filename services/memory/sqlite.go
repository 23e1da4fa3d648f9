package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver (pure Go)
)

// sqliteBusyTimeoutMS is how long a write waits for another connection's write to finish.
const sqliteBusyTimeoutMS = 10000

// OpenSQLite opens (creating when missing, mode 0600) the SQLite database file at path as a Store,
// creates its schema when missing, and turns on write-ahead logging. The file's directory
// must exist. Writes take the database's write lock when their transaction begins (BEGIN
// IMMEDIATE), so concurrent writers queue instead of failing. The memories an earlier release
// indexed are indexed again in the background (SQLStore.ReindexTerms), at once and then every
// WithReindexInterval. Close the store when done.
func OpenSQLite(ctx context.Context, path string, opts ...StoreOption) (*SQLStore, error) {
	if path == "" {
		return nil, errors.New("sqlite memory store: the database path is empty")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite memory store: the database path %q must not contain '?'", path)
	}
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("sqlite memory store %s: %w", path, err)
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
	s, err := openSQL(ctx, db, sqliteDialect, newStoreOptions(opts))
	if err != nil {
		return nil, fmt.Errorf("sqlite memory store %s: %w", path, err)
	}
	return s, nil
}

// createPrivate creates the database file at path, when missing, readable and writable by this
// process's user alone (0600): it holds every user's memories and saved runs, and SQLite
// creates the files it keeps beside it (-wal, -shm, a journal) with the database's mode. Left
// to SQLite, the file got 0644 under the usual umask, for every account of the host to read.
// A file that exists keeps its mode: its owner chose it. An in-memory database (":memory:") or a
// "file:" URI is SQLite's to open.
func createPrivate(path string) error {
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

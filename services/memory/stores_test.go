package memory_test

import (
	"os"
	"path/filepath"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) memory.Store { return memory.NewMemoryStore() })
}

// openSQLite opens the SQLite store at path, closed when t ends.
func openSQLite(t *testing.T, path string) *memory.SQLStore {
	t.Helper()
	s, err := memory.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The SQLite store writes ahead to a log (WAL), so readers do not wait for writers.
func TestSQLiteWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openSQLite(t, path)
	if err := s.SaveRun(t.Context(), "u", &typev1.RunResult{RunId: "r"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Errorf("no write-ahead log next to the database: %v", err)
	}
}

func TestSQLiteStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) memory.Store {
		return openSQLite(t, filepath.Join(t.TempDir(), "memory.db"))
	})
	path := filepath.Join(t.TempDir(), "restart.db")
	storetest.RunRestart(t, func(t *testing.T) memory.Store {
		s, err := memory.OpenSQLite(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// openPostgres opens a PostgreSQL store in its own schema of the test database, closed when
// t ends.
func openPostgres(t *testing.T, dsn string) *memory.SQLStore {
	t.Helper()
	s, err := memory.OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestPostgresStore(t *testing.T) {
	dsn := storetest.PostgresDSN(t) // fails the test, once, without a test database
	storetest.Run(t, func(t *testing.T) memory.Store {
		return openPostgres(t, storetest.PostgresDSN(t))
	})
	storetest.RunRestart(t, func(t *testing.T) memory.Store {
		s, err := memory.OpenPostgres(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

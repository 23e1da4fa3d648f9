package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvPostgresDSN names the environment variable that holds the DSN of the PostgreSQL test
// database; scripts/testdb.sh sets the database up and prints the DSN.
const EnvPostgresDSN = "AGENTMESH_TEST_POSTGRES_DSN"

// PostgresDSN returns the DSN of the test database with its search_path set to a new, empty
// schema, dropped with everything in it when t ends, so tests and packages running at the
// same time never see each other's tables. It fails t when EnvPostgresDSN is unset.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvPostgresDSN)
	if dsn == "" {
		t.Fatalf("%s is not set: the PostgreSQL store tests need a database. Run "+
			"`export %s=$(scripts/testdb.sh)` from the repository root (it installs and starts "+
			"PostgreSQL when missing and prints the DSN)", EnvPostgresDSN, EnvPostgresDSN)
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	schema := "agentmesh_test_" + hex.EncodeToString(suffix)
	exec(t, t.Context(), dsn, "CREATE SCHEMA "+schema)
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		exec(t, ctx, dsn, "DROP SCHEMA "+schema+" CASCADE")
	})
	return withSearchPath(t, dsn, schema)
}

// exec runs one statement on its own connection.
func exec(t testing.TB, ctx context.Context, dsn, stmt string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the test database (%s): %v", EnvPostgresDSN, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// withSearchPath returns dsn, a URL or key=value string, with search_path set to schema.
func withSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	if !strings.Contains(dsn, "://") {
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("%s is not a valid URL: %v", EnvPostgresDSN, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

package memory_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	"github.com/jackc/pgx/v5"
)

// withApplicationName returns dsn, a postgres:// URL, with a new application_name, which
// names the connections made with it in pg_stat_activity.
func withApplicationName(t *testing.T, dsn string) (string, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	name := "agentmesh_pool_" + hex.EncodeToString(suffix)
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String(), name
}

// connect opens a connection to dsn, closed when t ends.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// A memory stage on PostgreSQL opens at most memory.postgres_max_conns connections to its
// database: a burst of calls larger than that waits for a free connection instead of opening
// one each, which past the server's max_connections failed them STORAGE_ERROR. The burst's
// calls all wait on a lock the test holds, so each needs its connection at the same time.
func TestPostgresConnectionsAreCapped(t *testing.T) {
	const maxConns, burst = 3, 24
	base := storetest.PostgresDSN(t)
	dsn, app := withApplicationName(t, base)
	cfg := config.Default()
	cfg.Memory.Store, cfg.Memory.DSN, cfg.Memory.PostgresMaxConns = config.StorePostgres, dsn, maxConns
	c, stop := serveFromConfig(t, cfg)
	defer stop()
	store(t, c, "alice", "", "the schema exists and alice has a row")

	locker, watcher := connect(t, base), connect(t, base) // watcher: outside the lock's transaction
	tx, err := locker.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "LOCK TABLE memory_users IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	errs := make(chan error, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			_, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "alice",
				Content: user(fmt.Sprintf("burst memory number %d", i))})
			errs <- err
		})
	}
	// Every call the pool lets through waits on the lock: poll until maxConns do (or more,
	// the pool uncapped), counting the stage's connections each time.
	opened, waiting := 0, 0
	for deadline := time.Now().Add(30 * time.Second); waiting < maxConns && opened <= maxConns; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the stage's %d connections wait on the lock after 30s, want %d",
				waiting, opened, maxConns)
		}
		if err := watcher.QueryRow(t.Context(), `SELECT count(*),
	count(*) FILTER (WHERE wait_event_type = 'Lock')
FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&opened, &waiting); err != nil {
			t.Fatal(err)
		}
	}
	if opened > maxConns {
		t.Errorf("the stage opened %d connections at once, want at most memory.postgres_max_conns %d",
			opened, maxConns)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Store in the burst: %v", err)
		}
	}
}

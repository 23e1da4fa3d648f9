package memory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The indexes a release before the memories' document_key, document and terms_version columns
// lacked (the columns are there: an upgrade that adds a column locks its table as briefly as
// PostgreSQL lets it).
var addedIndexes = []string{"memories_document", "memories_of_document", "memories_terms_version"}

// schemaIndexes are every index of the store's schema.
var schemaIndexes = append([]string{"memories_newest", "memory_terms_memory", "learning_queue"},
	addedIndexes...)

// postgresWithoutIndexes makes a PostgreSQL database of a store whose memories table lacks the
// indexes, and returns its source and a connection pool to it.
func postgresWithoutIndexes(t *testing.T, indexes ...string) (string, *sql.DB) {
	t.Helper()
	source := storetest.PostgresDSN(t)
	s := openPostgres(t, source)
	s.StopReindexing()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, sqlDatabases[1], source)
	for _, name := range indexes {
		if _, err := db.ExecContext(t.Context(), "DROP INDEX "+name); err != nil {
			t.Fatal(err)
		}
	}
	return source, db
}

// insertRow inserts a memory of alice into the memories table through q, as a replica of an
// earlier release does (no terms), with the document key key ("" for NULL).
func insertRow(t *testing.T, ctx context.Context, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, id, key string) error {
	t.Helper()
	body, err := proto.Marshal(&memoryv1.Memory{Id: id, UserId: "alice", Content: "row " + id,
		CreatedAt: timestamppb.New(time.Unix(1, 0))})
	if err != nil {
		t.Fatal(err)
	}
	var k any
	if key != "" {
		k = key
	}
	_, err = q.ExecContext(ctx, `INSERT INTO memories
(id, user_id, collection, created_at, length, vector, body, document_key)
VALUES ($1, 'alice', '', 1, 0, NULL, $2, $3)`, id, body, k)
	return err
}

// indexStates returns, for each of names, "valid", "invalid" or "missing", and its definition.
func indexStates(t *testing.T, db *sql.DB, names ...string) (states, defs map[string]string) {
	t.Helper()
	states, defs = make(map[string]string), make(map[string]string)
	for _, name := range names {
		var valid bool
		var def string
		err := db.QueryRowContext(t.Context(), `SELECT i.indisvalid, pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname = $1 AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())`,
			name).Scan(&valid, &def)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			states[name] = "missing"
		case err != nil:
			t.Fatal(err)
		case valid:
			states[name], defs[name] = "valid", def
		default:
			states[name], defs[name] = "invalid", def
		}
	}
	return states, defs
}

// wantValid fails t unless every index of the schema is there and valid.
func wantValid(t *testing.T, db *sql.DB) {
	t.Helper()
	states, _ := indexStates(t, db, schemaIndexes...)
	for _, name := range schemaIndexes {
		if states[name] != "valid" {
			t.Errorf("index %s is %s, want valid", name, states[name])
		}
	}
}

// waitServing waits for s to be Serving, failing t after 30 s.
func waitServing(t *testing.T, s *memory.SQLStore) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		up, changed := s.Serving()
		if up {
			return
		}
		select {
		case <-changed:
		case err := <-s.Failed():
			t.Fatalf("the store failed instead of serving: %v", err)
		case <-timeout:
			t.Fatal("the store is still not serving after 30s")
		}
	}
}

// A store opening a PostgreSQL database whose memories table lacks indexes (an earlier
// release's) builds them without stopping the writes of other sessions: while the build waits
// for a transaction that wrote to the table (session A), another session's INSERT (B) goes
// through, and the store opened at once, not Serving until the indexes are built. The indexes
// were built in the schema transaction, whose CREATE INDEX queued for the table's SHARE lock
// behind A's write, and every later write (B's) behind it, until A ended, and the open waited
// as long.
func TestPostgresIndexBuildLetsWritesGoOn(t *testing.T) {
	source, db := postgresWithoutIndexes(t, addedIndexes...)
	a, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Rollback() }()
	if err := insertRow(t, t.Context(), a, "a", ""); err != nil {
		t.Fatal(err)
	}

	type opened struct {
		s   *memory.SQLStore
		err error
	}
	open := make(chan opened, 1)
	go func() {
		s, err := memory.OpenPostgres(t.Context(), source, 4)
		open <- opened{s, err}
	}()
	var s *memory.SQLStore
	select {
	case o := <-open:
		if o.err != nil {
			t.Fatal(o.err)
		}
		s = o.s
		t.Cleanup(func() { _ = s.Close() })
	case <-time.After(30 * time.Second):
		t.Fatal("the open waits for the transaction of another session that wrote to memories")
	}
	if up, _ := s.Serving(); up {
		t.Error("the store serves before its indexes are built")
	}

	// The build is under way, waiting for A.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM pg_stat_progress_create_index
WHERE relid = 'memories'::regclass AND command = 'CREATE INDEX CONCURRENTLY'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no concurrent index build of memories began within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	b, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ExecContext(t.Context(), `SET lock_timeout = '10s'`); err != nil {
		t.Fatal(err)
	}
	if err := insertRow(t, t.Context(), b, "b", "key-b"); err != nil {
		t.Fatalf("an INSERT into memories during the index build: %v", err)
	}
	if up, _ := s.Serving(); up {
		t.Error("the store serves before its indexes are built")
	}

	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	waitServing(t, s)
	wantValid(t, db)
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM memories`).Scan(&n); err != nil || n != 2 {
		t.Errorf("memories holds %d rows, %v; want A's and B's", n, err)
	}
}

// An index whose concurrent build was cut off (here by a statement timeout while it waited for
// a write transaction; as by a crash) is left INVALID, which CREATE INDEX IF NOT EXISTS takes
// for done: the store drops it and builds it again, valid, with its own definition. It stayed
// invalid for ever (and memories_terms_version, unused, left every pass of ReindexTerms to scan
// the table).
func TestPostgresRebuildsAnInvalidIndex(t *testing.T) {
	source, db := postgresWithoutIndexes(t, "memories_terms_version")
	a, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := insertRow(t, t.Context(), a, "a", ""); err != nil {
		t.Fatal(err)
	}
	c, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(t.Context(), `SET statement_timeout = '200ms'`); err != nil {
		t.Fatal(err)
	}
	// Another definition than the store's, to tell its build from this one.
	_, err = c.ExecContext(t.Context(), `CREATE INDEX CONCURRENTLY memories_terms_version ON memories (id)`)
	if err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("the build cut off by its statement timeout = %v", err)
	}
	_ = c.Close()
	if err := a.Rollback(); err != nil {
		t.Fatal(err)
	}
	if states, _ := indexStates(t, db, "memories_terms_version"); states["memories_terms_version"] != "invalid" {
		t.Fatalf("the cut-off build left the index %s, want invalid", states["memories_terms_version"])
	}

	s := openPostgres(t, source)
	waitServing(t, s)
	wantValid(t, db)
	_, defs := indexStates(t, db, "memories_terms_version")
	if def := defs["memories_terms_version"]; !strings.Contains(def, "(terms_version, id)") {
		t.Errorf("memories_terms_version is %q, want the store's index on (terms_version, id)", def)
	}
}

// A unique index that the rows stored break (two memories of alice with one document key,
// and two with another, stored before the index) cannot be built: the store is not Serving,
// and fails (Failed, and the service's, which the memory stage exits with) with an error naming
// the index, its table, columns and rule, how many keys are duplicated and the query that
// lists them, but no value of the rows: it is logged, and a user id and a document key are
// user data. The invalid index the build left is dropped. The schema transaction failed with
// PostgreSQL's error alone, tried again every second for ever; then the error held
// PostgreSQL's detail, "Key (user_id, document_key)=(alice, chunk-1) is duplicated".
func TestPostgresUniqueIndexOverDuplicatesFails(t *testing.T) {
	source, db := postgresWithoutIndexes(t, "memories_document")
	for id, key := range map[string]string{"m1": "chunk-1", "m2": "chunk-1", "m3": "chunk-2",
		"m4": "chunk-2", "m5": "chunk-3", "m6": ""} {
		if err := insertRow(t, t.Context(), db, id, key); err != nil {
			t.Fatal(err)
		}
	}
	s := openPostgres(t, source)
	svc := memory.New(memory.Options{Store: s})
	var err error
	select {
	case err = <-svc.Failed():
	case <-time.After(30 * time.Second):
		t.Fatal("the store has not failed within 30s")
	}
	var ierr *memory.IndexError
	if !errors.As(err, &ierr) || ierr.Index != "memories_document" {
		t.Fatalf("the store failed with %v, want an IndexError of memories_document", err)
	}
	if ierr.Duplicates != 2 {
		t.Errorf("the error counts %d keys duplicated, want 2", ierr.Duplicates)
	}
	query := "SELECT user_id, document_key, COUNT(*) FROM memories WHERE user_id IS NOT NULL " +
		"AND document_key IS NOT NULL GROUP BY user_id, document_key HAVING COUNT(*) > 1"
	for _, want := range []string{"memories_document", "memories (user_id, document_key)",
		"one memory of a user per document chunk", "2 keys", query} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	for _, value := range []string{"alice", "chunk-"} {
		if strings.Contains(err.Error(), value) {
			t.Errorf("the error %q shows %q, a value of the rows", err, value)
		}
	}
	// The query the error gives lists the keys duplicated.
	rows, qerr := db.QueryContext(t.Context(), query)
	if qerr != nil {
		t.Fatalf("the query of the error: %v", qerr)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var user, key string
		var n int
		if err := rows.Scan(&user, &key, &n); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, fmt.Sprintf("%s/%s×%d", user, key, n))
	}
	slices.Sort(keys)
	if want := []string{"alice/chunk-1×2", "alice/chunk-2×2"}; !slices.Equal(keys, want) {
		t.Errorf("the query of the error lists %v, want %v", keys, want)
	}
	if up, _ := s.Serving(); up {
		t.Error("the store serves without its unique index")
	}
	if states, _ := indexStates(t, db, "memories_document"); states["memories_document"] != "missing" {
		t.Errorf("the failed build left the index %s, want it dropped", states["memories_document"])
	}
}

// A store that finds another replica upgrading the schema (holding the schema lock) for longer
// than it waits opens at once, not Serving, and upgrades once the lock is free: a replica's
// start is not held for as long as another one's index builds take.
func TestPostgresOpensWhileAnotherReplicaUpgrades(t *testing.T) {
	source, db := postgresWithoutIndexes(t, addedIndexes...)
	memory.SetSchemaLockWait(t, 100*time.Millisecond)
	other, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(t.Context(), `SELECT pg_advisory_lock(7007)`); err != nil {
		t.Fatal(err)
	}
	s := openPostgres(t, source)
	if up, _ := s.Serving(); up {
		t.Error("the store serves while another replica upgrades the schema")
	}
	if _, err := other.ExecContext(t.Context(), `SELECT pg_advisory_unlock(7007)`); err != nil {
		t.Fatal(err)
	}
	waitServing(t, s)
	wantValid(t, db)
}

// Replicas opening an earlier release's database at once all serve, the indexes built once.
func TestPostgresReplicasUpgradeTogether(t *testing.T) {
	source, db := postgresWithoutIndexes(t, addedIndexes...)
	stores := make(chan *memory.SQLStore, 3)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			s, err := memory.OpenPostgres(t.Context(), source, 4)
			if err != nil {
				errs <- err
				return
			}
			stores <- s
		}()
	}
	for range 3 {
		select {
		case err := <-errs:
			t.Fatal(err)
		case s := <-stores:
			t.Cleanup(func() { _ = s.Close() })
			waitServing(t, s)
		}
	}
	wantValid(t, db)
}

// A store opening an empty database serves at once, every index made in the schema
// transaction (its tables are new: no other session writes them yet); one opening a database
// of the release before the memories' terms_version and document columns adds them and builds
// their indexes, and serves once they are built.
func TestPostgresOpensFreshAndEarlierDatabases(t *testing.T) {
	t.Run("fresh", func(t *testing.T) {
		source := storetest.PostgresDSN(t)
		s := openPostgres(t, source)
		if up, _ := s.Serving(); !up {
			t.Error("a store of an empty database does not serve at once")
		}
		wantValid(t, openDB(t, sqlDatabases[1], source))
	})
	t.Run("earlier release", func(t *testing.T) {
		source := storetest.PostgresDSN(t)
		db := earlierRelease(t, sqlDatabases[1], source)
		insertOld(t, sqlDatabases[1], db, oldTokyo, oldLatin)
		s := openPostgres(t, source)
		waitServing(t, s)
		wantValid(t, db)
		waitForSearches(t, s, map[string]string{"東京": "m0", "tokyo": "m1"})
	})
}

// A concurrent index build waits for every transaction that wrote to its table before it
// began (and then for every older snapshot), however long they stay open: while it waits
// longer than the interval WithIndexWaitWarning sets, the store warns, every interval, which
// build waits and for which backends (pid, state, how long their transaction has been open;
// not their query, which may hold user data), and it serves once they end. The replica stayed
// NOT_SERVING for as long, without a word of why.
func TestPostgresIndexBuildWaitIsLogged(t *testing.T) {
	source, db := postgresWithoutIndexes(t, "memories_terms_version")
	logs := captureLogs(t)
	a, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Rollback() }()
	var pid int
	if err := a.QueryRowContext(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := insertRow(t, t.Context(), a, "a", "secret-key-of-a"); err != nil {
		t.Fatal(err)
	}

	s := openPostgres(t, source, memory.WithIndexWaitWarning(100*time.Millisecond))
	backend := fmt.Sprintf("pid %d ", pid)
	var warning string
	for deadline := time.Now().Add(30 * time.Second); warning == ""; time.Sleep(10 * time.Millisecond) {
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "level=WARN") && strings.Contains(line, "memories_terms_version") &&
				strings.Contains(line, backend) {
				warning = line
			}
		}
		if warning == "" && time.Now().After(deadline) {
			t.Fatalf("no warning names the build of memories_terms_version waiting for pid %d "+
				"within 30s:\n%s", pid, logs.String())
		}
	}
	for _, want := range []string{"idle in transaction", "transaction open"} {
		if !strings.Contains(warning, want) {
			t.Errorf("the warning %q does not say %q", warning, want)
		}
	}
	for _, query := range []string{"INSERT", "secret-key-of-a"} {
		if strings.Contains(logs.String(), query) {
			t.Errorf("the log shows %q, of the waited-for backend's query:\n%s", query, logs.String())
		}
	}
	if up, _ := s.Serving(); up {
		t.Error("the store serves before its index is built")
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	waitServing(t, s)
	wantValid(t, db)
}

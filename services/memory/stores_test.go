package memory_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) memory.Store { return memory.NewMemoryStore() })
}

// openSQLite opens the SQLite store at path, closed when t ends.
func openSQLite(t *testing.T, path string, opts ...memory.StoreOption) *memory.SQLStore {
	t.Helper()
	s, err := memory.OpenSQLite(t.Context(), path, opts...)
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

// storeKind is a kind of store the tests run through the gRPC API on: its name (the subtest's)
// and how to open an empty one, closed when the test ends.
type storeKind struct {
	name string
	open func(t *testing.T) memory.Store
}

// sqlStores are the SQL stores: SQLite, and PostgreSQL in a schema of its own.
var sqlStores = []storeKind{
	{"sqlite", func(t *testing.T) memory.Store {
		return openSQLite(t, filepath.Join(t.TempDir(), "memory.db"))
	}},
	{"postgres", func(t *testing.T) memory.Store { return openPostgres(t, storetest.PostgresDSN(t)) }},
}

// everyStore is every kind of store: the in-memory store and the SQL stores.
var everyStore = append([]storeKind{
	{"memory", func(*testing.T) memory.Store { return memory.NewMemoryStore() }},
}, sqlStores...)

// onStores runs test as a subtest on an empty store of each of kinds.
func onStores(t *testing.T, kinds []storeKind, test func(t *testing.T, s memory.Store)) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { test(t, k.open(t)) })
	}
}

// postgresMaxConns is the most connections each PostgreSQL store of the tests opens, as many
// as the default memory.postgres_max_conns.
const postgresMaxConns = 16

// openPostgres opens a PostgreSQL store in its own schema of the test database, closed when
// t ends.
func openPostgres(t *testing.T, dsn string, opts ...memory.StoreOption) *memory.SQLStore {
	t.Helper()
	s, err := memory.OpenPostgres(t.Context(), dsn, postgresMaxConns, opts...)
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
		s, err := memory.OpenPostgres(t.Context(), dsn, postgresMaxConns)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// learningBefore is the learning table as stores made it before the trace context columns
// were added, with one run queued: $KEY and $BLOB are the dialect's column types.
const learningBefore = `CREATE TABLE learning (
	run_id $KEY PRIMARY KEY,
	user_id $KEY NOT NULL,
	queued_at BIGINT NOT NULL,
	claimed_until BIGINT NOT NULL,
	attempts INTEGER NOT NULL,
	learned_at BIGINT NOT NULL,
	learned $BLOB
);
INSERT INTO learning VALUES ('run-old', 'alice', 1, 0, 0, 0, NULL)`

// sqlDatabase is a SQL database a test fills itself before a store opens it, as an earlier
// release left it: its driver, the types of its key and blob columns, a new source (a file,
// a schema of the test database) and how a store opens it.
type sqlDatabase struct {
	name, driver, key, blob string
	source                  func(t *testing.T) string
	open                    func(t *testing.T, source string,
		opts ...memory.StoreOption) *memory.SQLStore
}

// sqlDatabases are the SQL databases: SQLite, and PostgreSQL.
var sqlDatabases = []sqlDatabase{
	{"sqlite", "sqlite", "TEXT", "BLOB", func(t *testing.T) string {
		return filepath.Join(t.TempDir(), "memory.db")
	}, openSQLite},
	{"postgres", "pgx", `TEXT COLLATE "C"`, "BYTEA", func(t *testing.T) string { return storetest.PostgresDSN(t) }, openPostgres},
}

// A database made before the learning queue kept each run's trace context gets the columns
// when a store opens it, and its queued runs are still learned from.
func TestSQLStoresAddColumns(t *testing.T) {
	for _, tc := range sqlDatabases {
		t.Run(tc.name, func(t *testing.T) {
			source := tc.source(t)
			db, err := sql.Open(tc.driver, source)
			if err != nil {
				t.Fatal(err)
			}
			for stmt := range strings.SplitSeq(strings.NewReplacer("$KEY", tc.key, "$BLOB", tc.blob).Replace(learningBefore), ";") {
				if _, err := db.ExecContext(t.Context(), stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			s := tc.open(t, source)
			now := time.Now()
			if job, ok, err := s.ClaimLearning(t.Context(), now, time.Minute); err != nil || job != (memory.LearnJob{RunID: "run-old", UserID: "alice", Attempts: 1}) {
				t.Fatalf("claim the run queued before = %+v, %v, %v", job, ok, err)
			}
			ctx := trace.ContextWithRemoteSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{15: 1}, SpanID: trace.SpanID{7: 2}, TraceFlags: trace.FlagsSampled}))
			if err := s.SaveRun(ctx, "alice", &typev1.RunResult{RunId: "run-new"}); err != nil {
				t.Fatal(err)
			}
			tc.open(t, source) // opened again: the columns are there
			job, ok, err := s.ClaimLearning(t.Context(), now, time.Minute)
			if err != nil || job.RunID != "run-new" || job.Traceparent != "00-00000000000000000000000000000001-0000000000000002-01" {
				t.Errorf("claim the run saved after = %+v, %v, %v; want run-new with its trace context", job, ok, err)
			}
		})
	}
}

// memoriesBefore is the memories table as stores made it before a document's chunk was held
// once, with an ingested chunk stored twice: $KEY and $BLOB are the dialect's column types,
// $BODY1 and $BODY2 its encodings.
const memoriesBefore = `CREATE TABLE memories (
	id $KEY PRIMARY KEY,
	user_id $KEY NOT NULL,
	collection $KEY NOT NULL,
	created_at BIGINT NOT NULL,
	length INTEGER NOT NULL,
	vector $BLOB,
	body $BLOB NOT NULL
);
INSERT INTO memories VALUES ('m1', 'alice', 'knowledge', 1, 2, NULL, $BODY1);
INSERT INTO memories VALUES ('m2', 'alice', 'knowledge', 2, 2, NULL, $BODY2)`

// A database in which an ingestion stored a chunk twice, before the store held a document's
// chunk once, still opens with both (the constraint covers the chunks stored from then on),
// and storing the chunk again leaves one new copy beside them.
func TestSQLStoresOpenWithDuplicateChunks(t *testing.T) {
	for _, tc := range sqlDatabases {
		t.Run(tc.name, func(t *testing.T) {
			meta, err := structpb.NewStruct(
				map[string]any{memory.MetaSource: "a.md", memory.MetaChunk: 0})
			if err != nil {
				t.Fatal(err)
			}
			chunk := &memoryv1.Memory{UserId: "alice", Collection: "knowledge",
				Content: "ingested chunk", Metadata: meta}
			bodies := make([]string, 2)
			for i := range bodies {
				chunk.Id = fmt.Sprintf("m%d", i+1)
				chunk.CreatedAt = timestamppb.New(time.Unix(0, int64(i+1)))
				body, err := proto.Marshal(chunk)
				if err != nil {
					t.Fatal(err)
				}
				bodies[i] = fmt.Sprintf("X'%x'", body)
			}
			source := tc.source(t)
			db, err := sql.Open(tc.driver, source)
			if err != nil {
				t.Fatal(err)
			}
			stmts := strings.NewReplacer("$KEY", tc.key, "$BLOB", tc.blob,
				"$BODY1", bodies[0], "$BODY2", bodies[1]).Replace(memoriesBefore)
			if tc.driver == "pgx" {
				stmts = strings.ReplaceAll(stmts, "X'", "'\\x")
			}
			for stmt := range strings.SplitSeq(stmts, ";") {
				if _, err := db.ExecContext(t.Context(), stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			s := tc.open(t, source)
			again := proto.CloneOf(chunk)
			again.CreatedAt = timestamppb.New(time.Unix(0, 3))
			for _, id := range []string{"m3", "m4"} {
				again.Id = id
				if err := s.PutMemory(t.Context(), again, nil, 100); err != nil {
					t.Fatal(err)
				}
			}
			page, err := s.ListMemories(t.Context(),
				memory.ListQuery{UserID: "alice", Collection: "knowledge", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range page {
				ids = append(ids, m.GetId())
			}
			if !slices.Equal(ids, []string{"m4", "m2", "m1"}) {
				t.Errorf("the collection holds %v, want m4 (which replaced m3), m2 and m1", ids)
			}
		})
	}
}

// A collection ingested by the release before the stores knew each chunk's document (its
// chunks' document column dropped again) is ingested again after a file changed, through the
// gRPC API: the collection holds the file's new chunks only, the unchanged one replaced in
// place (its key is unique) and the changed ones deleted by the ingestion.
func TestSQLStoresIngestAgainAfterUpgrade(t *testing.T) {
	for _, tc := range sqlDatabases {
		t.Run(tc.name, func(t *testing.T) {
			source := tc.source(t)
			dir := filepath.Join(t.TempDir(), "docs")
			ingest := func(text string) memory.IngestReport {
				t.Helper()
				writeFiles(t, dir, map[string]string{"a.md": text})
				c := newClient(t, memory.Options{Store: tc.open(t, source)})
				report, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir)
				if err != nil {
					t.Fatal(err)
				}
				return report
			}
			same := paragraphs(1, "same")
			ingest(same + "\n\n" + paragraphs(2, "before"))
			db := openDB(t, tc, source)
			for _, stmt := range []string{`DROP INDEX memories_of_document`,
				`ALTER TABLE memories DROP COLUMN document`} {
				if _, err := db.ExecContext(t.Context(), stmt); err != nil {
					t.Fatalf("%s: %v", stmt, err)
				}
			}
			text := same + "\n\n" + paragraphs(2, "after")
			report := ingest(text)
			var got []string
			for _, m := range listStore(t, tc.open(t, source)) {
				got = append(got, m.GetContent())
			}
			slices.Sort(got)
			want := splitChunks(text)
			slices.Sort(want)
			if !slices.Equal(got, want) || report.Replaced != 3 || report.Chunks != 3 {
				t.Errorf("the collection holds %d chunks (%d of the new text), report %+v; "+
					"want the 3 new ones, replacing the 3 earlier", len(got), len(want), report)
			}
		})
	}
}

// listStore returns alice's knowledge collection in s.
func listStore(t *testing.T, s memory.Store) []*memoryv1.Memory {
	t.Helper()
	page, err := s.ListMemories(t.Context(),
		memory.ListQuery{UserID: "alice", Collection: "knowledge", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return page
}

package memory_test

import (
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// oldMemory is a memory of alice as a release before the memories' terms_version indexed it.
type oldMemory struct {
	id, text string
	// terms are the terms that release indexed it by, with their frequencies.
	terms map[string]int
}

// Memories whose terms a release before terms_version indexed otherwise than this one: a
// sentence of a script written without spaces as one term (terms version 1), full-width
// letters as words of their own (version 3); and one it indexed as this one does.
var (
	oldTokyo = oldMemory{"m0", "私は東京に住んでいます", map[string]int{"私は東京に住んでいます": 1}}
	oldLatin = oldMemory{"m1", "Tokyo is far", map[string]int{"tokyo": 1, "far": 1}}
	oldWide  = oldMemory{"m2", "ＡＷＳ notes", map[string]int{"ａｗｓ": 1, "notes": 1}}
)

// openDB opens the database of a store of tc at source, closed when t ends: a SQLite
// database waits for the write lock a store's transaction holds, as the store's connections do.
func openDB(t *testing.T, tc sqlDatabase, source string) *sql.DB {
	t.Helper()
	if tc.driver == "sqlite" {
		source += "?_pragma=busy_timeout(10000)"
	}
	db, err := sql.Open(tc.driver, source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// bindFor returns query, written with '?' placeholders, as the driver takes it: with $1, $2,
// ... for PostgreSQL (pg).
func bindFor(query string, pg bool) string {
	if !pg {
		return query
	}
	for n := 1; strings.Contains(query, "?"); n++ {
		query = strings.Replace(query, "?", "$"+strconv.Itoa(n), 1)
	}
	return query
}

// insertOld writes the memories into db as a replica of a release before terms_version does:
// an INSERT of the row that does not name the column, and the memory's terms as it indexed
// them, in one transaction.
func insertOld(t *testing.T, tc sqlDatabase, db *sql.DB, ms ...oldMemory) {
	t.Helper()
	bind := func(query string) string { return bindFor(query, tc.driver == "pgx") }
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, m := range ms {
		body, err := proto.Marshal(&memoryv1.Memory{Id: m.id, UserId: "alice", Content: m.text,
			CreatedAt: timestamppb.New(time.Unix(1, 0))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(t.Context(), bind(`INSERT INTO memories
(id, user_id, collection, created_at, length, vector, body)
VALUES (?, 'alice', '', 1, ?, NULL, ?)`), m.id, len(m.terms), body); err != nil {
			t.Fatalf("insert %s: %v", m.id, err)
		}
		for term, tf := range m.terms {
			if _, err := tx.ExecContext(t.Context(), bind(`INSERT INTO memory_terms
(user_id, collection, term, memory_id, tf) VALUES ('alice', '', ?, ?, ?)`),
				term, m.id, tf); err != nil {
				t.Fatalf("insert a term of %s: %v", m.id, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// searchFinds reports whether searching alice's memories in s for each query of want finds
// exactly the memory it names.
func searchFinds(t *testing.T, s memory.Store, want map[string]string) (bool, string) {
	t.Helper()
	for _, query := range slices.Sorted(maps.Keys(want)) {
		hits, err := s.SearchMemories(t.Context(),
			memory.SearchQuery{UserID: "alice", Query: query, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != 1 || hits[0].GetMemory().GetId() != want[query] {
			return false, fmt.Sprintf("search %q found %v, want %s", query, storeHitIDs(hits),
				want[query])
		}
	}
	return true, ""
}

func storeHitIDs(hits []*memoryv1.MemoryHit) []string {
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.GetMemory().GetId())
	}
	return ids
}

// waitForSearches polls searchFinds until it holds, failing t after 10 s.
func waitForSearches(t *testing.T, s memory.Store, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, why := searchFinds(t, s, want)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still after 10s: %s", why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// staleRows counts the memories of db whose terms_version is older than the store's.
func staleRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(),
		`SELECT COUNT(*) FROM memories WHERE terms_version < 4`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// earlierRelease makes the database at source as the release before the memories'
// terms_version (and document) left it, its one-time re-index of the terms recorded as done
// (memory_schema "terms" 4), and returns it.
func earlierRelease(t *testing.T, tc sqlDatabase, source string) *sql.DB {
	t.Helper()
	s := tc.open(t, source)
	s.StopReindexing()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, tc, source)
	for _, stmt := range []string{
		`DROP INDEX memories_of_document`, `ALTER TABLE memories DROP COLUMN document`,
		`DROP INDEX memories_terms_version`, `ALTER TABLE memories DROP COLUMN terms_version`,
	} {
		if _, err := db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	var version int
	err := db.QueryRowContext(t.Context(),
		`SELECT version FROM memory_schema WHERE name = 'terms'`).Scan(&version)
	if err != nil || version != 4 {
		t.Fatalf("the terms version recorded = %d, %v; want 4", version, err)
	}
	return db
}

// TestSQLStoresReindexUnspaced: a database of the release before the memories'
// terms_version, whose memories a replica of an earlier release still indexed as it did (a
// sentence written without spaces as one term, full-width letters as other words) although
// the one-time re-index was recorded as done, is upgraded when a store opens it: the memories
// are indexed again, in the background, and a word inside such a sentence finds its memory.
// The one-time re-index was not run again, so such a memory was never found.
func TestSQLStoresReindexUnspaced(t *testing.T) {
	for _, tc := range sqlDatabases {
		t.Run(tc.name, func(t *testing.T) {
			source := tc.source(t)
			db := earlierRelease(t, tc, source)
			insertOld(t, tc, db, oldTokyo, oldLatin, oldWide)
			s := tc.open(t, source)
			waitForSearches(t, s, map[string]string{"東京": "m0", "東": "m0", "tokyo": "m1",
				"aws": "m2", "ＡＷＳ": "m2"})
			if n := staleRows(t, db); n != 0 {
				t.Errorf("%d memories are still at an older terms version", n)
			}
		})
	}
}

// TestSQLStoresReindexRowsOfOldReplicas: during a rolling upgrade, a replica not yet upgraded
// writes memories after an upgraded one opened the database (an INSERT without terms_version,
// with its terms as its release indexed them): the upgraded store's periodic pass indexes them
// again, and a word inside a sentence written without spaces finds its memory. The re-index
// ran once, when the schema was created: such memories were never found.
func TestSQLStoresReindexRowsOfOldReplicas(t *testing.T) {
	for _, tc := range sqlDatabases {
		t.Run(tc.name, func(t *testing.T) {
			source := tc.source(t)
			s := tc.open(t, source, memory.WithReindexInterval(20*time.Millisecond))
			db := openDB(t, tc, source)
			insertOld(t, tc, db, oldTokyo, oldLatin, oldWide)
			waitForSearches(t, s, map[string]string{"東京": "m0", "東": "m0", "tokyo": "m1",
				"aws": "m2"})
			if n := staleRows(t, db); n != 0 {
				t.Errorf("%d memories are still at an older terms version", n)
			}
		})
	}
}

// TestSQLStoresReindexInBatches: more memories of an earlier release than one transaction of
// ReindexTerms takes are all indexed again, a batch at a time; those whose terms were right
// already only get the version, the plain ones (Latin) without their terms being read.
func TestSQLStoresReindexInBatches(t *testing.T) {
	for _, tc := range sqlDatabases {
		t.Run(tc.name, func(t *testing.T) {
			source := tc.source(t)
			s := tc.open(t, source)
			s.StopReindexing()
			db := openDB(t, tc, source)
			const n = 2*memory.ReindexBatchRows + 100
			ms := make([]oldMemory, n)
			for i := range ms {
				id := fmt.Sprintf("m%04d", i)
				ms[i] = oldMemory{id, "Tokyo " + id, map[string]int{"tokyo": 1, id: 1}}
				if i%2 == 0 {
					ms[i] = oldMemory{id, "東京 " + id, map[string]int{"東京": 1, id: 1}}
				}
			}
			insertOld(t, tc, db, ms...)
			got, err := s.ReindexTerms(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := memory.TermsReindex{Memories: n, Rewritten: n / 2, Plain: n / 2, Batches: 3}
			if got != want {
				t.Errorf("ReindexTerms = %+v, want %+v", got, want)
			}
			if stale := staleRows(t, db); stale != 0 {
				t.Errorf("%d memories are still at an older terms version", stale)
			}
			hits, err := s.SearchMemories(t.Context(),
				memory.SearchQuery{UserID: "alice", Query: "東", Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != 100 {
				t.Errorf("search 東 found %d memories, want 100 (the limit) of the %d holding it",
					len(hits), n/2)
			}
			again, err := s.ReindexTerms(t.Context())
			if err != nil || again != (memory.TermsReindex{}) {
				t.Errorf("ReindexTerms again = %+v, %v; want nothing done", again, err)
			}
		})
	}
}

// termRows returns the rows of memory_terms of the memories ids in db, as "id term tf", sorted.
func termRows(t *testing.T, tc sqlDatabase, db *sql.DB, ids ...string) []string {
	t.Helper()
	var rows []string
	for _, id := range ids {
		query := `SELECT term, tf FROM memory_terms WHERE memory_id = ?`
		if tc.driver == "pgx" {
			query = strings.Replace(query, "?", "$1", 1)
		}
		r, err := db.QueryContext(t.Context(), query, id)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var term string
			var tf int
			if err := r.Scan(&term, &tf); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, fmt.Sprintf("%s %s %d", id, term, tf))
		}
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		_ = r.Close()
	}
	slices.Sort(rows)
	return rows
}

// TestSQLStoresReindexLeavesPlainMemories: the pass after an upgrade gives every memory of an
// earlier release the current terms version, rewrites the terms of those of a script written
// without spaces or of full-width letters that it indexed otherwise (found by their words
// then), and leaves the terms of the others alone, unread: a plain memory (Latin, Cyrillic,
// Hangul...) is indexed by every version alike. The pass read and compared every memory's
// terms.
func TestSQLStoresReindexLeavesPlainMemories(t *testing.T) {
	plain := []oldMemory{
		oldLatin,
		{"p2", "Café au lait, 2024", map[string]int{"café": 1, "au": 1, "lait": 1, "2024": 1}},
		{"p3", "Привет, мир", map[string]int{"привет": 1, "мир": 1}},
		{"p4", "서울에 살아요", map[string]int{"서울에": 1, "살아요": 1}},
		// Terms that are not this text's (made so here): a plain memory's are not even read.
		{"p5", "Osaka trip", map[string]int{"osaka": 1, "trip": 1, "unread": 1}},
	}
	others := []oldMemory{oldTokyo, oldWide,
		{"t1", "กรุงเทพ", map[string]int{"กรุงเทพ": 1}},
		// Indexed as this release does already (by one of version 4, before the column).
		{"c1", "大阪", map[string]int{"大阪": 1, "大": 1, "阪": 1}},
	}
	var plainIDs []string
	for _, m := range plain {
		plainIDs = append(plainIDs, m.id)
	}
	for _, tc := range sqlDatabases {
		t.Run(tc.name, func(t *testing.T) {
			source := tc.source(t)
			s := tc.open(t, source)
			s.StopReindexing()
			db := openDB(t, tc, source)
			insertOld(t, tc, db, append(slices.Clone(plain), others...)...)
			before := termRows(t, tc, db, plainIDs...)
			got, err := s.ReindexTerms(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := memory.TermsReindex{Memories: len(plain) + len(others), Rewritten: 3,
				Plain: len(plain), Batches: 1}
			if got != want {
				t.Errorf("ReindexTerms = %+v, want %+v", got, want)
			}
			if stale := staleRows(t, db); stale != 0 {
				t.Errorf("%d memories are still at an older terms version", stale)
			}
			if after := termRows(t, tc, db, plainIDs...); !slices.Equal(after, before) {
				t.Errorf("the plain memories' terms went from %q to %q, want them untouched",
					before, after)
			}
			if ok, why := searchFinds(t, s, map[string]string{"東京": "m0", "東": "m0",
				"aws": "m2", "ＡＷＳ": "m2", "กรุง": "t1", "大阪": "c1", "tokyo": "m1",
				"café": "p2", "мир": "p3", "서울에": "p4", "unread": "p5"}); !ok {
				t.Error(why)
			}
		})
	}
}

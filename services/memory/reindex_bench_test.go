package memory_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// benchMemories is the number of memories of an earlier release the benchmark re-indexes.
const benchMemories = 5000

// benchMix is the memories of the benchmark: one in japaneseEvery of them (none when 0) is
// Japanese, which that release indexed as one term, the others English.
type benchMix struct {
	name          string
	japaneseEvery int
}

// japanese reports whether the benchmark's memory i is Japanese.
func (m benchMix) japanese(i int) bool { return m.japaneseEvery > 0 && i%m.japaneseEvery == 0 }

// benchText returns the text of the benchmark's memory i and the terms that release indexed it
// by: a fact of twelve words, or a Japanese sentence.
func (m benchMix) text(i int) (string, map[string]int) {
	if m.japanese(i) {
		text := fmt.Sprintf("私は東京に住んでいます%d", i)
		return text, map[string]int{text: 1}
	}
	words := []string{"user", "prefers", "green", "tea", "mornings", "lives", "berlin", "works",
		"acme", "project", "deadline", "friday", "likes", "hiking", "alps", "summer"}
	var b strings.Builder
	terms := make(map[string]int)
	for j := range 11 {
		w := words[(i*7+j*3)%len(words)]
		b.WriteString(w + " ")
		terms[w]++
	}
	id := "n" + strconv.Itoa(i)
	b.WriteString(id)
	terms[id]++
	return "The " + b.String(), terms
}

// fillOld writes the benchmark's memories into db as that release did (no terms_version);
// with reset, they are there already: it sets them back to version 0 and the Japanese ones'
// terms back to that release's.
func fillOld(b *testing.B, db *sql.DB, pg bool, mix benchMix, reset bool) {
	b.Helper()
	tx, err := db.BeginTx(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	exec := func(query string, args ...any) {
		if _, err := tx.ExecContext(b.Context(), bindFor(query, pg), args...); err != nil {
			b.Fatalf("%s: %v", query, err)
		}
	}
	if reset {
		exec(`UPDATE memories SET terms_version = 0`)
	}
	for i := range benchMemories {
		id := fmt.Sprintf("m%05d", i)
		text, terms := mix.text(i)
		if reset {
			if !mix.japanese(i) {
				continue
			}
			exec(`DELETE FROM memory_terms WHERE memory_id = ?`, id)
		} else {
			body, err := proto.Marshal(&memoryv1.Memory{Id: id, UserId: "alice", Content: text,
				CreatedAt: timestamppb.New(time.Unix(1, 0))})
			if err != nil {
				b.Fatal(err)
			}
			exec(`INSERT INTO memories (id, user_id, collection, created_at, length, vector, body)
VALUES (?, 'alice', '', 1, ?, NULL, ?)`, id, len(terms), body)
		}
		for term, tf := range terms {
			exec(`INSERT INTO memory_terms (user_id, collection, term, memory_id, tf)
VALUES ('alice', '', ?, ?, ?)`, term, id, tf)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if reset && pg {
		if _, err := db.ExecContext(b.Context(), `VACUUM ANALYZE memories, memory_terms`); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReindexTerms is the pass of ReindexTerms after an upgrade over 5,000 memories of an
// earlier release: all English ("english"), or a tenth of them Japanese ("tenth-japanese"),
// which it rewrites. terms=read-all reads and compares every memory's terms (the pass before
// plain memories were trusted: the baseline), terms=plain-trusted gives the plain ones the
// version unread (benchstat -col /terms). PostgreSQL's runs with AGENTMESH_TEST_POSTGRES_DSN
// set, each pass on a table vacuumed first, as its reset leaves a dead row of each memory.
func BenchmarkReindexTerms(b *testing.B) {
	for _, db := range []string{"sqlite", "postgres"} {
		for _, mix := range []benchMix{{"english", 0}, {"tenth-japanese", 10}} {
			b.Run("db="+db+"/memories="+mix.name, func(b *testing.B) { benchmarkReindex(b, db, mix) })
		}
	}
}

func benchmarkReindex(b *testing.B, db string, mix benchMix) {
	var s *memory.SQLStore
	var source, driver string
	var err error
	if db == "sqlite" {
		source, driver = filepath.Join(b.TempDir(), "memory.db"), "sqlite"
		s, err = memory.OpenSQLite(b.Context(), source)
	} else {
		if os.Getenv(storetest.EnvPostgresDSN) == "" {
			b.Skip(storetest.EnvPostgresDSN + " is not set")
		}
		source, driver = storetest.PostgresDSN(b), "pgx"
		s, err = memory.OpenPostgres(b.Context(), source, 4)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	s.StopReindexing()
	conn, err := sql.Open(driver, source)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	pg := driver == "pgx"
	fillOld(b, conn, pg, mix, false)
	rewritten := 0
	if mix.japaneseEvery > 0 {
		rewritten = (benchMemories + mix.japaneseEvery - 1) / mix.japaneseEvery
	}
	for _, mode := range []struct {
		name    string
		trusted bool
	}{{"read-all", false}, {"plain-trusted", true}} {
		b.Run("terms="+mode.name, func(b *testing.B) {
			memory.SetPlainShortcut(b, mode.trusted)
			for b.Loop() {
				b.StopTimer()
				fillOld(b, conn, pg, mix, true)
				b.StartTimer()
				r, err := s.ReindexTerms(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				if r.Memories != benchMemories || r.Rewritten != rewritten {
					b.Fatalf("ReindexTerms = %+v, want %d memories, %d rewritten", r,
						benchMemories, rewritten)
				}
			}
		})
	}
}

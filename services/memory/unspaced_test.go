package memory_test

import (
	"path/filepath"
	"slices"
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
)

// TestSearchUnspacedScripts: through the gRPC API on each SQL store, a Chinese or Japanese
// word finds the memories holding it inside a sentence written without spaces, and a word
// none holds finds nothing. Words were split at spaces only, so it found nothing.
func TestSearchUnspacedScripts(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) memory.Store
	}{
		{"sqlite", func(t *testing.T) memory.Store {
			return openSQLite(t, filepath.Join(t.TempDir(), "memory.db"))
		}},
		{"postgres", func(t *testing.T) memory.Store {
			return openPostgres(t, storetest.PostgresDSN(t))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, memory.Options{Store: tc.open(t)})
			tokyo := store(t, c, "alice", "", "私は東京に住んでいます")
			tea := store(t, c, "alice", "", "我每天早上喝绿茶")
			store(t, c, "alice", "", "The office is in Berlin")
			for query, want := range map[string][]string{
				"東京": {tokyo}, "绿茶": {tea}, "住んで": {tokyo}, "大阪": nil, "咖啡": nil,
			} {
				resp, err := c.Search(t.Context(),
					&memoryv1.SearchRequest{UserId: "alice", Query: query})
				if err != nil {
					t.Fatal(err)
				}
				if got := ids(resp.GetHits()); !slices.Equal(got, want) {
					t.Errorf("search %q = %v, want %v", query, got, want)
				}
			}
		})
	}
}

// TestSearchOneUnspacedCharacter: through the gRPC API on each store, a query of one Chinese
// or Japanese character (a word of its own: 猫, cat) finds the memories holding it inside a
// longer run, and a query of two still finds only those holding the pair. A run was indexed
// as its pairs of characters only, which no query of one character matched.
func TestSearchOneUnspacedCharacter(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) memory.Store
	}{
		{"memory", func(*testing.T) memory.Store { return memory.NewMemoryStore() }},
		{"sqlite", func(t *testing.T) memory.Store {
			return openSQLite(t, filepath.Join(t.TempDir(), "memory.db"))
		}},
		{"postgres", func(t *testing.T) memory.Store {
			return openPostgres(t, storetest.PostgresDSN(t))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, memory.Options{Store: tc.open(t)})
			cat := store(t, c, "alice", "", "我的猫很可爱")
			tokyo := store(t, c, "alice", "", "私は東京に住んでいます")
			for query, want := range map[string][]string{
				"猫": {cat}, "東": {tokyo}, "东京": nil, "京都": nil, "狗": nil, "東京": {tokyo},
			} {
				resp, err := c.Search(t.Context(),
					&memoryv1.SearchRequest{UserId: "alice", Query: query})
				if err != nil {
					t.Fatal(err)
				}
				if got := ids(resp.GetHits()); !slices.Equal(got, want) {
					t.Errorf("search %q = %v, want %v", query, got, want)
				}
			}
		})
	}
}

// TestSearchFullWidth: through the gRPC API on each store, a query in ASCII letters and digits
// finds a Japanese memory that writes them full-width (２０２４年, ＡＷＳ), and the other way
// round. Full-width letters and digits were other words than their ASCII forms.
func TestSearchFullWidth(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) memory.Store
	}{
		{"memory", func(*testing.T) memory.Store { return memory.NewMemoryStore() }},
		{"sqlite", func(t *testing.T) memory.Store {
			return openSQLite(t, filepath.Join(t.TempDir(), "memory.db"))
		}},
		{"postgres", func(t *testing.T) memory.Store {
			return openPostgres(t, storetest.PostgresDSN(t))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, memory.Options{Store: tc.open(t)})
			wide := store(t, c, "alice", "", "２０２４年にＡＷＳへ移行した")
			ascii := store(t, c, "alice", "", "東京tower 2025年")
			for query, want := range map[string][]string{
				"2024": {wide}, "aws": {wide}, "ＡＷＳ": {wide}, "２０２５": {ascii},
				"ｔｏｗｅｒ": {ascii}, "2026": nil,
			} {
				resp, err := c.Search(t.Context(),
					&memoryv1.SearchRequest{UserId: "alice", Query: query})
				if err != nil {
					t.Fatal(err)
				}
				if got := ids(resp.GetHits()); !slices.Equal(got, want) {
					t.Errorf("search %q = %v, want %v", query, got, want)
				}
			}
		})
	}
}

package memory_test

import (
	"slices"
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/services/memory"
)

// TestSearchUnspacedScripts: through the gRPC API on each SQL store, a Chinese or Japanese
// word finds the memories holding it inside a sentence written without spaces, and a word
// none holds finds nothing. Words were split at spaces only, so it found nothing.
func TestSearchUnspacedScripts(t *testing.T) {
	onStores(t, sqlStores, func(t *testing.T, s memory.Store) {
		c := newClient(t, memory.Options{Store: s})
		tokyo := store(t, c, "alice", "", "私は東京に住んでいます")
		tea := store(t, c, "alice", "", "我每天早上喝绿茶")
		store(t, c, "alice", "", "The office is in Berlin")
		wantSearches(t, c, "alice", map[string][]string{
			"東京": {tokyo}, "绿茶": {tea}, "住んで": {tokyo}, "大阪": nil, "咖啡": nil,
		})
	})
}

// TestSearchOneUnspacedCharacter: through the gRPC API on each store, a query of one Chinese
// or Japanese character (a word of its own: 猫, cat) finds the memories holding it inside a
// longer run, and a query of two still finds only those holding the pair. A run was indexed
// as its pairs of characters only, which no query of one character matched.
func TestSearchOneUnspacedCharacter(t *testing.T) {
	onStores(t, everyStore, func(t *testing.T, s memory.Store) {
		c := newClient(t, memory.Options{Store: s})
		cat := store(t, c, "alice", "", "我的猫很可爱")
		tokyo := store(t, c, "alice", "", "私は東京に住んでいます")
		wantSearches(t, c, "alice", map[string][]string{
			"猫": {cat}, "東": {tokyo}, "东京": nil, "京都": nil, "狗": nil, "東京": {tokyo},
		})
	})
}

// TestSearchFullWidth: through the gRPC API on each store, a query in ASCII letters and digits
// finds a Japanese memory that writes them full-width (２０２４年, ＡＷＳ), and the other way
// round. Full-width letters and digits were other words than their ASCII forms.
func TestSearchFullWidth(t *testing.T) {
	onStores(t, everyStore, func(t *testing.T, s memory.Store) {
		c := newClient(t, memory.Options{Store: s})
		wide := store(t, c, "alice", "", "２０２４年にＡＷＳへ移行した")
		ascii := store(t, c, "alice", "", "東京tower 2025年")
		wantSearches(t, c, "alice", map[string][]string{
			"2024": {wide}, "aws": {wide}, "ＡＷＳ": {wide}, "２０２５": {ascii},
			"ｔｏｗｅｒ": {ascii}, "2026": nil,
		})
	})
}

// wantSearches searches the memories of userID through c for each query of want, and fails
// t unless each finds the memories want names, in that order.
func wantSearches(t *testing.T, c memoryv1.MemoryServiceClient, userID string,
	want map[string][]string,
) {
	t.Helper()
	for query, wantIDs := range want {
		resp, err := c.Search(t.Context(), &memoryv1.SearchRequest{UserId: userID, Query: query})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(resp.GetHits()); !slices.Equal(got, wantIDs) {
			t.Errorf("search %q = %v, want %v", query, got, wantIDs)
		}
	}
}

package storetest

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/services/memory"
)

// A word of a script written without spaces between words (Chinese, Japanese, Thai) finds the
// memories holding it inside a longer run of the script, whatever stands beside it, and a
// word that none holds finds nothing. The query's and the memories' runs are split into the
// same overlapping pairs of characters.
func testSearchUnspaced(t *testing.T, s memory.Store) {
	put(t, s, newMemory(t, "u", "", "tokyo", at(1), "私は東京に住んでいます"), nil)
	put(t, s, newMemory(t, "u", "", "beijing", at(2), "我住在北京，每天喝茶。"), nil)
	put(t, s, newMemory(t, "u", "", "thai", at(3), "ฉันชอบกินข้าวผัด"), nil)
	put(t, s, newMemory(t, "u", "", "mixed", at(4), "The office moved to 大阪市 in 2024"), nil)
	put(t, s, newMemory(t, "u", "", "english", at(5), "Tokyo is the capital"), nil)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"東京", []string{"tokyo"}},
		{"東京はどこ？", []string{"tokyo"}},
		{"北京", []string{"beijing"}},
		{"喝茶", []string{"beijing"}},
		{"ข้าวผัด", []string{"thai"}},
		{"ชอบ", []string{"thai"}},
		{"ไทย", nil},
		{"大阪", []string{"mixed"}},
		{"tokyo", []string{"english"}},
		{"上海", nil},
		{"京都", nil},
	} {
		hits := search(t, s, memory.SearchQuery{UserID: "u", Query: tc.query})
		if got := hitIDs(hits); !slices.Equal(got, tc.want) {
			t.Errorf("search %q = %v, want %v", tc.query, got, tc.want)
		}
	}
}

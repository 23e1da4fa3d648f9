package storetest

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/services/memory"
)

// near reports whether two scores are equal up to float32 vector rounding.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// BM25 ranks by matching terms and their rarity, normalised so the best hit scores 1.
func testSearchLexical(t *testing.T, s memory.Store) {
	put(t, s, newMemory(t, "u", "", "postgres", at(1), "The production database is PostgreSQL 16 on the db01 host"), nil)
	put(t, s, newMemory(t, "u", "", "both", at(2), "Backups of the production database run nightly"), nil)
	put(t, s, newMemory(t, "u", "", "backups", at(3), "Backups are kept for thirty days"), nil)
	put(t, s, newMemory(t, "u", "", "tea", at(4), "The user prefers tea over coffee"), nil)
	put(t, s, newMemory(t, "u", "kb", "other", at(5), "database database database in another collection"), nil)

	t.Run("scores are BM25 over the user's collection, normalised", func(t *testing.T) {
		hits := search(t, s, memory.SearchQuery{UserID: "u", Query: "Which database runs PostgreSQL?"})
		if got := hitIDs(hits); !slices.Equal(got, []string{"postgres", "both"}) {
			t.Fatalf("hits = %v, want [postgres both]", got)
		}
		// The personal collection has 4 memories of 6, 5, 4 and 5 terms (average 5);
		// "database" is in 2 of them, "postgresql" in 1.
		bm25 := func(tf, length, df float64) float64 {
			idf := math.Log(1 + (4-df+0.5)/(df+0.5))
			return idf * tf * 2.2 / (tf + 1.2*(0.25+0.75*length/5))
		}
		top := bm25(1, 6, 2) + bm25(1, 6, 1)
		second := bm25(1, 5, 2)
		if hits[0].GetRelevanceScore() != 1 {
			t.Errorf("top score = %v, want 1", hits[0].GetRelevanceScore())
		}
		if got, want := hits[1].GetRelevanceScore(), second/top; !near(got, want) {
			t.Errorf("second score = %v, want %v", got, want)
		}
	})
	t.Run("more matching terms rank higher", func(t *testing.T) {
		got := hitIDs(search(t, s, memory.SearchQuery{UserID: "u", Query: "nightly backups of the database"}))
		if len(got) != 3 || got[0] != "both" || !slices.Contains(got, "backups") || !slices.Contains(got, "postgres") {
			t.Errorf("hits = %v, want both first, then backups and postgres", got)
		}
	})
	t.Run("min score and limit", func(t *testing.T) {
		if got := hitIDs(search(t, s, memory.SearchQuery{UserID: "u", Query: "postgresql database", MinScore: 0.999})); !slices.Equal(got, []string{"postgres"}) {
			t.Errorf("min_score hits = %v", got)
		}
		if got := search(t, s, memory.SearchQuery{UserID: "u", Query: "backups database", Limit: 1}); len(got) != 1 {
			t.Errorf("limit 1 returned %v", hitIDs(got))
		}
	})
	t.Run("no matching term, no hits", func(t *testing.T) {
		for _, q := range []string{"kubernetes", "the of and", "?!"} {
			if got := search(t, s, memory.SearchQuery{UserID: "u", Query: q}); len(got) != 0 {
				t.Errorf("%q: hits %v", q, hitIDs(got))
			}
		}
	})
	t.Run("an empty collection has no hits", func(t *testing.T) {
		if got := search(t, s, memory.SearchQuery{UserID: "u", Collection: "empty", Query: "database", Vector: []float32{1}}); len(got) != 0 {
			t.Errorf("hits %v", hitIDs(got))
		}
	})
}

// Equally relevant memories list newest first, then by id descending.
func testSearchTies(t *testing.T, s memory.Store) {
	put(t, s, newMemory(t, "u", "", "old", at(1), "note about golang"), nil)
	put(t, s, newMemory(t, "u", "", "new-a", at(3), "note about golang"), nil)
	put(t, s, newMemory(t, "u", "", "new-b", at(3), "note about golang"), nil)
	put(t, s, newMemory(t, "u", "", "mid", at(2), "note about golang"), nil)
	hits := search(t, s, memory.SearchQuery{UserID: "u", Query: "golang"})
	if got := hitIDs(hits); !slices.Equal(got, []string{"new-b", "new-a", "mid", "old"}) {
		t.Errorf("hits = %v, want [new-b new-a mid old]", got)
	}
	for _, h := range hits {
		if h.GetRelevanceScore() != 1 {
			t.Errorf("%s scores %v, want 1", h.GetMemory().GetId(), h.GetRelevanceScore())
		}
	}
}

// With a query vector, relevance is 0.8·max(0, cosine) + 0.2·normalised BM25.
func testSearchSemantic(t *testing.T, s memory.Store) {
	put(t, s, newMemory(t, "u", "", "same", at(1), "alpha text"), []float32{1, 0, 0})
	put(t, s, newMemory(t, "u", "", "close", at(2), "beta text"), []float32{0.6, 0.8, 0})
	put(t, s, newMemory(t, "u", "", "orthogonal", at(3), "gamma text"), []float32{0, 0, 1})
	put(t, s, newMemory(t, "u", "", "words-only", at(4), "zebra"), nil)
	put(t, s, newMemory(t, "u", "", "other-model", at(5), "epsilon"), []float32{1, 0})
	put(t, s, newMemory(t, "u", "", "opposite", at(6), "delta"), []float32{-1, 0, 0})
	put(t, s, newMemory(t, "u", "kb", "other-collection", at(7), "alpha"), []float32{1, 0, 0})
	query := []float32{2, 0, 0} // the length of the vector does not matter

	hits := search(t, s, memory.SearchQuery{UserID: "u", Query: "zebra", Vector: query})
	want := []struct {
		id    string
		score float64
	}{{"same", 0.8}, {"close", 0.8 * 0.6}, {"words-only", 0.2}}
	if len(hits) != len(want) {
		t.Fatalf("hits = %v, want [same close words-only]", hitIDs(hits))
	}
	for i, w := range want {
		if hits[i].GetMemory().GetId() != w.id || !near(hits[i].GetRelevanceScore(), w.score) {
			t.Errorf("hit %d = %s scoring %v, want %s scoring %v", i, hits[i].GetMemory().GetId(), hits[i].GetRelevanceScore(), w.id, w.score)
		}
	}
	t.Run("shared words add to the similarity", func(t *testing.T) {
		hits := search(t, s, memory.SearchQuery{UserID: "u", Query: "beta", Vector: []float32{0.6, 0.8, 0}})
		if got := hitIDs(hits); len(got) < 2 || got[0] != "close" || got[1] != "same" {
			t.Fatalf("hits = %v, want close then same", got)
		}
		if !near(hits[0].GetRelevanceScore(), 1) || !near(hits[1].GetRelevanceScore(), 0.8*0.6) {
			t.Errorf("scores = %v and %v, want 1 and %v", hits[0].GetRelevanceScore(), hits[1].GetRelevanceScore(), 0.8*0.6)
		}
	})
	t.Run("min score and limit", func(t *testing.T) {
		if got := hitIDs(search(t, s, memory.SearchQuery{UserID: "u", Query: "zebra", Vector: query, MinScore: 0.5})); !slices.Equal(got, []string{"same"}) {
			t.Errorf("min_score 0.5 hits = %v", got)
		}
		if got := hitIDs(search(t, s, memory.SearchQuery{UserID: "u", Query: "zebra", Vector: query, Limit: 2})); !slices.Equal(got, []string{"same", "close"}) {
			t.Errorf("limit 2 hits = %v", got)
		}
	})
	t.Run("found by meaning without a shared word", func(t *testing.T) {
		if got := hitIDs(search(t, s, memory.SearchQuery{UserID: "u", Query: "unrelated", Vector: query})); !slices.Equal(got, []string{"same", "close"}) {
			t.Errorf("hits = %v, want [same close]", got)
		}
	})
}

// A query of more distinct terms than a SQL statement takes parameters (SQLite 32,766,
// PostgreSQL 65,535) is ranked, and checked for a duplicate, like any other.
func testSearchManyTerms(t *testing.T, s memory.Store) {
	put(t, s, newMemory(t, "u", "", "go", at(1), "note about golang"), nil)
	put(t, s, newMemory(t, "u", "", "tea", at(2), "the user prefers tea"), nil)
	var query strings.Builder
	for i := range 70_000 {
		fmt.Fprintf(&query, "w%d ", i)
	}
	query.WriteString("golang")
	hits, err := s.SearchMemories(t.Context(), memory.SearchQuery{UserID: "u", Query: query.String(), Limit: 10})
	if got := hitIDs(hits); err != nil || !slices.Equal(got, []string{"go"}) {
		t.Errorf("hits = %v, %v; want [go]", got, err)
	}
	dup, err := s.DuplicateMemory(t.Context(), memory.SearchQuery{UserID: "u", Query: query.String()}, 0.95)
	if err != nil || dup != "" {
		t.Errorf("DuplicateMemory = %q, %v; want none", dup, err)
	}
}

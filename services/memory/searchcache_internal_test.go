package memory

import (
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
)

// TestSearchCacheKeepsNoSearchAWriteOverlapped: a search that began before a write and
// finished after it may have read the store before the write; it is not kept, so the next
// search reads the store again. The cache also evicts its least recently used search when
// full, and a write drops the writer's searches only.
func TestSearchCacheKeepsNoSearchAWriteOverlapped(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hits := []*memoryv1.MemoryHit{{Memory: &memoryv1.Memory{Id: "m1"}, RelevanceScore: 1}}
	key := func(user, query string) searchKey { return searchKey{user: user, query: query, limit: 5} }
	c := newSearchCache(2, time.Minute)

	began := c.begin()
	c.wrote("bob") // any user's write: the search may have read a store mid-write
	c.put(key("alice", "q"), hits, now, began)
	if _, ok := c.get(key("alice", "q"), now); ok {
		t.Error("a search that a write overlapped was kept")
	}

	c.put(key("alice", "q"), hits, now, c.begin())
	c.put(key("bob", "q"), hits, now, c.begin())
	c.get(key("alice", "q"), now) // alice's search is now the most recently used
	c.put(key("carol", "q"), hits, now, c.begin())
	if _, ok := c.get(key("bob", "q"), now); ok {
		t.Error("the least recently used search was not evicted")
	}
	if _, ok := c.get(key("alice", "q"), now); !ok {
		t.Error("the most recently used search was evicted")
	}
	c.wrote("alice")
	if _, ok := c.get(key("alice", "q"), now); ok {
		t.Error("alice's search outlived her write")
	}
	if _, ok := c.get(key("carol", "q"), now); !ok {
		t.Error("alice's write dropped carol's search")
	}
	if _, ok := c.byUser["carol"]; !ok || len(c.byUser) != 1 || c.searches.Len() != 1 {
		t.Errorf("the cache holds %d searches, users %v; want carol's only",
			c.searches.Len(), c.byUser)
	}
}

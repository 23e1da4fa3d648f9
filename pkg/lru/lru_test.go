package lru_test

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/lru"
)

// TestCacheEvictsLeastRecentlyUsed: Put evicts the least recently used entries past the size,
// a Get or a Put making an entry the most recently used, and reports each eviction; Remove
// drops an entry without reporting it.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	var evicted []string
	c := lru.New(2, func(k string, v int) { evicted = append(evicted, k) })
	c.Put("a", 1)
	c.Put("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %d, %v", v, ok)
	}
	c.Put("c", 3) // evicts b, the least recently used
	if _, ok := c.Get("b"); ok || !slices.Equal(evicted, []string{"b"}) {
		t.Fatalf("b still cached, or evicted %v", evicted)
	}
	c.Put("a", 10) // replaces a, now the most recently used
	c.Put("d", 4)  // evicts c
	if v, _ := c.Get("a"); v != 10 || !slices.Equal(evicted, []string{"b", "c"}) || c.Len() != 2 {
		t.Errorf("a = %d, evicted %v, len %d", v, evicted, c.Len())
	}
	if !c.Remove("a") || c.Remove("a") || c.Len() != 1 || len(evicted) != 2 {
		t.Errorf("Remove: len %d, evicted %v", c.Len(), evicted)
	}
}

// TestCacheOfSizeZeroKeepsNothing: a cache of size 0 evicts what is put at once.
func TestCacheOfSizeZeroKeepsNothing(t *testing.T) {
	c := lru.New[string, int](0, nil)
	c.Put("a", 1)
	if _, ok := c.Get("a"); ok || c.Len() != 0 {
		t.Errorf("a cache of size 0 kept an entry")
	}
}

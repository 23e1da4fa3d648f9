package memory_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/memory"
)

// stoppedClock is a Now that moves only when the test moves it.
type stoppedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stoppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stoppedClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// search searches userID's memories for query and returns the hits' ids and how many times
// the search asked emb for a vector.
func search(t *testing.T, c memoryv1.MemoryServiceClient, emb *conceptEmbedder, userID, query string) (ids []string, embedded int32) {
	t.Helper()
	calls := emb.calls.Load()
	resp, err := c.Search(t.Context(), &memoryv1.SearchRequest{UserId: userID, Query: query})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range resp.GetHits() {
		ids = append(ids, h.GetMemory().GetId())
	}
	return ids, emb.calls.Load() - calls
}

// TestSearchesAreCached (seed 002 §8, retrieval caching): a successful search asked again
// answers from the cache, without embedding its query again (no request, none accounted) or
// reading the store; each user's searches are its own; a write to the user's memories through
// the service (a store, a delete) is seen by the next search at once; an empty search is not
// cached; a write through another replica of the same store is seen once the cached search has
// aged out. Every search embedded its query and read the store again.
func TestSearchesAreCached(t *testing.T) {
	clock := &stoppedClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	emb := &conceptEmbedder{}
	shared := memory.NewMemoryStore()
	opts := memory.Options{Store: shared, Embedder: emb, Now: clock.Now, SearchCacheTTL: time.Minute}
	c := newClient(t, opts)
	replica := memoryv1.NewMemoryServiceClient(grpctest.Serve(t, memory.New(opts).Register))

	first := store(t, c, "alice", "", "the deploy key rotates monthly")
	store(t, c, "bob", "", "the deploy key of bob rotates weekly")
	got, embedded := search(t, c, emb, "alice", "deploy key")
	if !slices.Equal(got, []string{first}) || embedded != 1 {
		t.Fatalf("first search: hits %v with %d embedding requests, want [%s] with 1", got, embedded, first)
	}
	if again, embedded := search(t, c, emb, "alice", "deploy key"); !slices.Equal(again, got) || embedded != 0 {
		t.Errorf("the same search again: hits %v with %d embedding requests, want the cached hits and none", again, embedded)
	}
	if bobs, _ := search(t, c, emb, "bob", "deploy key"); len(bobs) != 1 || bobs[0] == first {
		t.Errorf("bob's search found %v, want his own memory only", bobs)
	}

	second := store(t, c, "alice", "", "the deploy key is kept in the vault")
	if got, _ := search(t, c, emb, "alice", "deploy key"); !slices.Contains(got, second) || !slices.Contains(got, first) {
		t.Errorf("after a store: hits %v, want both memories", got)
	}
	if _, err := c.Delete(t.Context(), &memoryv1.DeleteRequest{UserId: "alice", MemoryId: first}); err != nil {
		t.Fatal(err)
	}
	if got, _ := search(t, c, emb, "alice", "deploy key"); !slices.Equal(got, []string{second}) {
		t.Errorf("after a delete: hits %v, want [%s]", got, second)
	}

	if got, _ := search(t, c, emb, "alice", "lunch"); len(got) != 0 {
		t.Fatalf("hits %v for lunch, want none", got)
	}
	lunch := store(t, replica, "alice", "", "lunch is at noon") // the other replica's write
	if got, _ := search(t, c, emb, "alice", "lunch"); !slices.Equal(got, []string{lunch}) {
		t.Errorf("an empty search was cached: hits %v after another replica's write, want [%s]", got, lunch)
	}
	noon := store(t, replica, "alice", "", "the deploy key is rotated at noon")
	if got, _ := search(t, c, emb, "alice", "deploy key"); slices.Contains(got, noon) {
		t.Fatalf("hits %v: the other replica's write is found at once, so this search was not cached", got)
	}
	clock.advance(time.Minute + time.Millisecond)
	if got, _ := search(t, c, emb, "alice", "deploy key"); !slices.Contains(got, noon) {
		t.Errorf("hits %v a minute later, want the other replica's write (%s) found", got, noon)
	}
}

// TestSearchCacheOff: a negative SearchCacheSize turns the cache off: every search embeds its
// query.
func TestSearchCacheOff(t *testing.T) {
	emb := &conceptEmbedder{}
	c := newClient(t, memory.Options{Embedder: emb, SearchCacheSize: -1})
	store(t, c, "alice", "", "the deploy key rotates monthly")
	for range 2 {
		if _, embedded := search(t, c, emb, "alice", "deploy key"); embedded != 1 {
			t.Errorf("%d embedding requests, want 1 for every search", embedded)
		}
	}
}

// TestADegradedSearchIsNotCached: a search whose query could not be embedded (BM25 alone
// ranked its hits) is not cached: the next one embeds and ranks by meaning again.
func TestADegradedSearchIsNotCached(t *testing.T) {
	emb := &conceptEmbedder{}
	c := newClient(t, memory.Options{Embedder: emb})
	store(t, c, "alice", "", "the deploy key rotates monthly")
	emb.failing.Store(true)
	search(t, c, emb, "alice", "deploy key")
	emb.failing.Store(false)
	if _, embedded := search(t, c, emb, "alice", "deploy key"); embedded != 1 {
		t.Errorf("%d embedding requests after a failed one, want 1: the degraded search was cached", embedded)
	}
}

package memory

import (
	"sync"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/lru"
	"google.golang.org/protobuf/proto"
)

// Defaults of the search cache (Options.SearchCacheSize, Options.SearchCacheTTL).
const (
	// DefaultSearchCacheSize is the number of searches the cache holds when
	// Options.SearchCacheSize is 0.
	DefaultSearchCacheSize = 1024
	// DefaultSearchCacheTTL is how long a cached search answers when Options.SearchCacheTTL is
	// 0: the longest a memory written through another replica of a shared store (PostgreSQL)
	// goes unseen by a search this replica cached.
	DefaultSearchCacheTTL = time.Minute
)

// searchKey is what shapes a search's hits: the user, the collection, the query and the
// retriever's settings. The embedding model is the service's, the same for every key.
type searchKey struct {
	user, collection, query string
	limit                   int
	minScore                float64
}

// searchCache is seed 002 §8's retrieval cache: a bounded LRU of the hits of successful
// searches, each for at most ttl. A write to a user's memories through this service drops the
// user's entries, and a search that a write of any user overlapped is not kept, so a search
// never answers from before a write this replica made; writes through other replicas of a
// shared store are seen at most ttl later. Its entries are in a pkg/lru cache, under the
// cache's own lock with the index by user that a write drops them through and that eviction
// keeps in step (golang-lru, which the mesh uses elsewhere, calls its eviction callback under
// a lock of its own, which put and wrote would take in the other order).
type searchCache struct {
	mu       sync.Mutex
	ttl      time.Duration
	searches *lru.Cache[searchKey, *searchEntry]
	byUser   map[string]map[searchKey]struct{}
	writes   uint64 // writes so far, of any user (searchCache.wrote)
}

type searchEntry struct {
	hits []*memoryv1.MemoryHit
	at   time.Time
}

func newSearchCache(size int, ttl time.Duration) *searchCache {
	c := &searchCache{ttl: ttl, byUser: map[string]map[searchKey]struct{}{}}
	c.searches = lru.New(size, func(k searchKey, _ *searchEntry) { c.unindex(k) })
	return c
}

// get returns a copy of the hits cached for k at or after now-ttl, or false.
func (c *searchCache) get(k searchKey, now time.Time) ([]*memoryv1.MemoryHit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.searches.Get(k)
	if !ok {
		return nil, false
	}
	if now.Sub(e.at) > c.ttl {
		c.remove(k)
		return nil, false
	}
	return cloneHits(e.hits), true
}

// begin returns the count of writes before a search reads the store; put keeps the search's
// hits only when no write came since.
func (c *searchCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// put stores a copy of hits for k, found at now by a search that began at writes (begin),
// unless a write came since or there is no hit (an empty search is not cached), evicting the
// least recently used search when full.
func (c *searchCache) put(k searchKey, hits []*memoryv1.MemoryHit, now time.Time, writes uint64) {
	if len(hits) == 0 {
		return
	}
	hits = cloneHits(hits)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes != writes {
		return
	}
	if c.byUser[k.user] == nil {
		c.byUser[k.user] = map[searchKey]struct{}{}
	}
	c.byUser[k.user][k] = struct{}{}
	c.searches.Put(k, &searchEntry{hits: hits, at: now})
}

// wrote drops the searches of user, whose memories changed, and keeps the searches in flight
// from being cached (put).
func (c *searchCache) wrote(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	for k := range c.byUser[user] {
		c.remove(k)
	}
}

// remove drops the search of k from the cache; c.mu is held.
func (c *searchCache) remove(k searchKey) {
	c.searches.Remove(k)
	c.unindex(k)
}

// unindex drops k from the index by user, once its search left the cache; c.mu is held.
func (c *searchCache) unindex(k searchKey) {
	delete(c.byUser[k.user], k)
	if len(c.byUser[k.user]) == 0 {
		delete(c.byUser, k.user)
	}
}

// cloneHits returns a deep copy of hits: the cache's entries are never handed out, so that a
// caller in the same process may change what it got.
func cloneHits(hits []*memoryv1.MemoryHit) []*memoryv1.MemoryHit {
	out := make([]*memoryv1.MemoryHit, len(hits))
	for i, h := range hits {
		out[i] = proto.CloneOf(h)
	}
	return out
}

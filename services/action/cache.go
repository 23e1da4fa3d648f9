package action

import (
	"container/list"
	"sync"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
)

// callKey identifies a tool call across the mesh.
type callKey struct {
	runID, callID string
}

// outcome is an executed call's result, as cached.
type outcome struct {
	tool string
	resp *actionv1.ExecuteResponse
}

// resultCache is a bounded LRU of executed results keyed by (run_id, call_id). It is safe for
// concurrent use.
type resultCache struct {
	mu      sync.Mutex
	size    int
	order   *list.List // front is most recently used; values are *cacheEntry
	entries map[callKey]*list.Element
}

type cacheEntry struct {
	key callKey
	out outcome
}

func newResultCache(size int) *resultCache {
	return &resultCache{size: size, order: list.New(), entries: make(map[callKey]*list.Element)}
}

// get returns the cached outcome of key and marks it recently used.
func (c *resultCache) get(key callKey) (outcome, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return outcome{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).out, true
}

// add stores the outcome of key, evicting the least recently used entry when full.
func (c *resultCache) add(key callKey, out outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		el.Value.(*cacheEntry).out = out
		c.order.MoveToFront(el)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, out: out})
	if c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*cacheEntry).key)
	}
}

package generation

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"google.golang.org/protobuf/proto"
)

// DefaultCacheSize is the number of answers the response cache holds when Options.CacheSize
// is 0.
const DefaultCacheSize = 1024

// responseCache is a bounded LRU of canonical answers keyed by request hash.
type responseCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // front = most recently used; values are *cacheEntry
	items map[string]*list.Element
}

type cacheEntry struct {
	key  string
	resp *generationv1.GenerateResponse
}

func newResponseCache(size int) *responseCache {
	return &responseCache{size: size, order: list.New(), items: map[string]*list.Element{}}
}

// get returns a copy of the cached answer marked cached, or false. A cached answer costs
// nothing: no provider was called.
func (c *responseCache) get(key string) (*generationv1.GenerateResponse, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	resp := proto.CloneOf(el.Value.(*cacheEntry).resp)
	resp.Cached = true
	resp.LatencyMs = 0
	resp.CostUsd = 0
	return resp, true
}

// put stores a copy of resp, evicting the least recently used answer when full.
func (c *responseCache) put(key string, resp *generationv1.GenerateResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value.(*cacheEntry).resp = proto.CloneOf(resp)
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&cacheEntry{key: key, resp: proto.CloneOf(resp)})
	for c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*cacheEntry).key)
	}
}

// cacheKey is the hex SHA-256 of everything that shapes the answer: provider, model,
// messages, tools, sampling, tool choice, strict mode and output format. The run id and the
// use_cache flag are left out so identical calls of different runs share an entry.
func cacheKey(req *generationv1.GenerateRequest) string {
	keyed := proto.CloneOf(req)
	keyed.RunId = ""
	keyed.UseCache = false
	data, _ := proto.MarshalOptions{Deterministic: true}.Marshal(keyed)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// cacheable reports whether an answer may be served again: empty and rejected answers are
// not, nor one the provider's content filter stopped (not the model's answer, whatever part
// of it was delivered), so that a retry gets a fresh attempt.
func cacheable(resp *generationv1.GenerateResponse) bool {
	return resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_DONE &&
		resp.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_REJECTED &&
		resp.GetStopReason() != stopContentFilter
}

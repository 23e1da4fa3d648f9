package generation

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sync"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/lru"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/proto"
)

// DefaultCacheSize is the number of answers the response cache holds when Options.CacheSize
// is 0.
const DefaultCacheSize = 1024

// responseCache is a bounded LRU of canonical answers keyed by request hash.
type responseCache struct {
	mu      sync.Mutex
	answers *lru.Cache[string, *generationv1.GenerateResponse]
}

func newResponseCache(size int) *responseCache {
	return &responseCache{answers: lru.New[string, *generationv1.GenerateResponse](size, nil)}
}

// get returns a copy of the cached answer marked cached, or false. A cached answer costs
// nothing: no provider was called.
func (c *responseCache) get(key string) (*generationv1.GenerateResponse, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cached, ok := c.answers.Get(key)
	if !ok {
		return nil, false
	}
	resp := proto.CloneOf(cached)
	resp.Cached = true
	resp.LatencyMs = 0
	resp.CostUsd = 0
	return resp, true
}

// put stores a copy of resp, evicting the least recently used answer when full.
func (c *responseCache) put(key string, resp *generationv1.GenerateResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answers.Put(key, proto.CloneOf(resp))
}

// cacheKey is the hex SHA-256 of the user the call acts for (requestCacheKey) and of everything
// that shapes the answer: provider, model, messages, tools, sampling, tool choice, strict mode and
// output format (seed 002 §8 keys by model and messages). The run id and the use_cache flag
// are left out so identical calls of different runs share an entry; the user is in, so that
// they share it only when the runs are the same user's: another user's hit would both show
// that the request was sent before and serve one user's answer to another.
func cacheKey(user string, req *generationv1.GenerateRequest) string {
	keyed := proto.CloneOf(req)
	keyed.RunId = ""
	keyed.UseCache = false
	data, _ := proto.MarshalOptions{Deterministic: true}.Marshal(keyed)
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	// Length-prefixed: no user id and request run into another's.
	_, _ = h.Write(n[:binary.PutUvarint(n[:], uint64(len(user)))])
	_, _ = h.Write([]byte(user))
	_, _ = h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// requestCacheKey is the cache key of req (cacheKey) for the user the call of ctx acts for, as
// its auth.UserMetadata names it (the orchestrator sets it on a run's calls), or for no user
// ("") when it names none. Metadata that is not a user id is INVALID_ARGUMENT: it does not say
// whose entries the call may read.
func requestCacheKey(ctx context.Context, req *generationv1.GenerateRequest) (string, error) {
	p, ok, err := auth.IncomingUser(ctx)
	if err != nil {
		return "", stageerr.Invalid("use_cache: the response cache is kept per user, and %v", err)
	}
	user := ""
	if ok {
		user = p.ID()
	}
	return cacheKey(user, req), nil
}

// cacheable reports whether an answer may be served again: empty and rejected answers are
// not, nor one the provider's content filter stopped (not the model's answer, whatever part
// of it was delivered), so that a retry gets a fresh attempt.
func cacheable(resp *generationv1.GenerateResponse) bool {
	return resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_DONE &&
		resp.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_REJECTED &&
		resp.GetStopReason() != stopContentFilter
}

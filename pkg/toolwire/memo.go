package toolwire

import (
	"runtime"
	"sync"
	"weak"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Memo keeps a value derived from each shared tool, for as long as the tool lives: what a
// process derives from the tools it is sent again and again (a schema's JSON, its token
// count) it derives once. A shared tool is one Share registered or Unmarshal decoded; nobody
// changes those. The zero Memo is ready to use and safe for concurrent use.
type Memo[V any] struct {
	values sync.Map // weak.Pointer[typev1.Tool] → V
}

// Get returns derive(t), derived once while t lives when t is shared and on every call when
// it is not.
func (m *Memo[V]) Get(t *typev1.Tool, derive func(*typev1.Tool) V) V {
	if t == nil {
		return derive(t)
	}
	key := weak.Make(t)
	if !isShared(key) {
		return derive(t)
	}
	if v, ok := m.values.Load(key); ok {
		return v.(V)
	}
	v := derive(t)
	if _, loaded := m.values.LoadOrStore(key, v); !loaded {
		runtime.AddCleanup(t, func(key weak.Pointer[typev1.Tool]) { m.values.Delete(key) }, key)
	}
	return v
}

// decodedTools holds the tools Unmarshal decoded, by weak pointer: they are shared as the
// ones Share registered are.
var decodedTools sync.Map // weak.Pointer[typev1.Tool] → struct{}

// isShared reports whether the tool key points to is one Share registered or Unmarshal
// decoded.
func isShared(key weak.Pointer[typev1.Tool]) bool {
	if _, ok := encodings.Load(key); ok {
		return true
	}
	_, ok := decodedTools.Load(key)
	return ok
}

// decodedShared records that Unmarshal decoded t, to be shared.
func decodedShared(t *typev1.Tool) {
	key := weak.Make(t)
	decodedTools.Store(key, struct{}{})
	runtime.AddCleanup(t, func(key weak.Pointer[typev1.Tool]) { decodedTools.Delete(key) }, key)
}

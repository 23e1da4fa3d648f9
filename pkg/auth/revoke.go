package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// ErrKeyRevoked is the cause of the end of a call that Hold holds, once its API key is taken
// out of the keys file (FollowKeys).
var ErrKeyRevoked = errors.New("the API key was revoked")

// revokedErr is what the client of a call ended by the revocation of its key is told:
// UNAUTHENTICATED, as its next call would be.
var revokedErr = &stageerr.Error{
	Code:  stageerr.ErrUnauthenticated.Code,
	Msg:   "the API key was revoked: it was taken out of the server's API keys, and calls made with it end",
	Cause: ErrKeyRevoked,
}

// RevokedError returns the error that ends a call of ctx, a context of Hold, because its API
// key was revoked (UNAUTHENTICATED, wrapping ErrKeyRevoked); nil when the call was not ended so.
func RevokedError(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrKeyRevoked) {
		return cause
	}
	return nil
}

// Hold returns the context to serve a long call in (a stream), which the call authenticated
// with an API key of the keys file (FollowKeys) ends with the cause ErrKeyRevoked (RevokedError)
// once that key is taken out of the file: within the file's reload interval, whether or not
// other calls come meanwhile. Call release when the call ends. A call authenticated otherwise,
// or by an Authenticator of fixed keys (New), is served in ctx as it is.
//
// No goroutine is started per call: the calls held are in one set, which a reload of the keys
// looks through, and one goroutine of the Authenticator reloads them while any call is held.
func (a *Authenticator) Hold(ctx context.Context) (held context.Context, release func()) {
	if a.held == nil {
		return ctx, func() {}
	}
	if p, ok := FromContext(ctx); !ok || p.Method != MethodAPIKey {
		return ctx, func() {}
	}
	key, err := apiKey(ctx)
	if err != nil || key == "" {
		return ctx, func() {}
	}
	c := &heldCall{sum: sha256.Sum256([]byte(key))}
	held, c.cancel = context.WithCancelCause(ctx)
	a.held.add(c)
	return held, func() {
		a.held.remove(c)
		c.cancel(context.Canceled)
	}
}

// heldCall is a call that Hold holds: the SHA-256 of its API key, and what ends it.
type heldCall struct {
	sum    [sha256.Size]byte
	cancel context.CancelCauseFunc
}

// holds are the calls an Authenticator of followed keys holds. While it holds any, one
// goroutine (watch) gets the keys at every reload interval, so that the file is read again
// without a call to read it; each new set of keys (revoke) ends the calls whose key it lacks.
type holds struct {
	keys *followed[keySet]

	mu       sync.Mutex
	calls    map[*heldCall]struct{}
	watching bool          // watch runs
	idle     chan struct{} // told by remove that no call is held, for watch to end now
}

// newHolds returns the holds of the followed keys, which it tells of every new set of keys.
func newHolds(keys *followed[keySet]) *holds {
	h := &holds{keys: keys, calls: map[*heldCall]struct{}{}, idle: make(chan struct{}, 1)}
	keys.loaded = h.revoke
	return h
}

// add holds c, starting watch when it does not run; c ends at once if its key is gone already
// (revoked after the call was authenticated, before it was held).
func (h *holds) add(c *heldCall) {
	h.mu.Lock()
	h.calls[c] = struct{}{}
	start := !h.watching
	h.watching = true
	h.mu.Unlock()
	if start {
		go h.watch()
	}
	if _, ok := (*h.keys.get())[c.sum]; !ok {
		h.end([]*heldCall{c})
	}
}

// remove stops holding c, and reports whether it held it.
func (h *holds) remove(c *heldCall) bool {
	h.mu.Lock()
	_, held := h.calls[c]
	delete(h.calls, c)
	empty := len(h.calls) == 0 && h.watching
	h.mu.Unlock()
	if empty {
		select {
		case h.idle <- struct{}{}:
		default:
		}
	}
	return held
}

// revoke ends the calls held whose key set lacks.
func (h *holds) revoke(set *keySet) {
	var gone []*heldCall
	h.mu.Lock()
	for c := range h.calls {
		if _, ok := (*set)[c.sum]; !ok {
			gone = append(gone, c)
		}
	}
	h.mu.Unlock()
	h.end(gone)
}

// end ends those of the calls that are still held, as their key was revoked.
func (h *holds) end(calls []*heldCall) {
	ended := 0
	for _, c := range calls {
		if h.remove(c) {
			c.cancel(revokedErr)
			ended++
		}
	}
	if ended > 0 {
		slog.Info("calls of a revoked API key ended", "calls", ended)
	}
}

// minWatch is the shortest wait of watch between two looks at the keys.
const minWatch = time.Millisecond

// watch gets the keys whenever their reload interval has passed (followed.get reads the file
// again then, and a new set of keys comes to revoke), for as long as a call is held.
func (h *holds) watch() {
	t := time.NewTimer(max(h.keys.untilCheck(), minWatch))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			h.keys.get()
			t.Reset(max(h.keys.untilCheck(), minWatch))
		case <-h.idle:
		}
		h.mu.Lock()
		if len(h.calls) == 0 {
			h.watching = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
}

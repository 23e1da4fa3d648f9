package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
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

// certRevokedErr is what the client of a call ended by the revocation of its connection's
// client certificate is told: UNAUTHENTICATED, as its next call would be, naming the
// certificate, its serial and the CRL that lists it (err, which wraps ErrRevoked).
func certRevokedErr(err error) error {
	return &stageerr.Error{
		Code: stageerr.ErrUnauthenticated.Code,
		Msg: "the client certificate was revoked: a CRL the server follows lists it now, and calls made with it end: " +
			err.Error(),
		Cause: err,
	}
}

// RevokedError returns the error that ends a call of ctx, a context of Hold, because its API
// key was revoked (UNAUTHENTICATED, wrapping ErrKeyRevoked) or its client certificate
// (UNAUTHENTICATED, wrapping ErrRevoked); nil when the call was not ended so.
func RevokedError(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrKeyRevoked) || errors.Is(cause, ErrRevoked) {
		return cause
	}
	return nil
}

// Holds reports whether Hold holds calls: a's keys are followed in a file (FollowKeys), or its
// client certificates' CRLs (RefuseRevoked).
func (a *Authenticator) Holds() bool { return a != nil && a.held != nil }

// noRelease is the release of a call Hold does not hold.
func noRelease() {}

// Hold returns the context to serve a long call in (a stream, a unary call that waits on a
// run), which ends with the cause RevokedError returns once what authenticated the call is
// revoked: the API key of the keys file (FollowKeys) it was made with, taken out of the file
// (ErrKeyRevoked); or the client certificate of its connection, listed by the CRLs of
// RefuseRevoked once they are read again (ErrRevoked). Either within the files' reload
// interval, whether or not other calls come meanwhile. Call release when the call ends. A call
// that nothing can revoke (of an Authenticator of fixed keys, New, without CRLs; of no key and
// no client certificate; one not authenticated, as health and reflection are not) is served
// in ctx as it is.
//
// No goroutine is started per call: the calls held are in one set, which a reload of the keys
// or of the CRLs looks through, and one goroutine of the Authenticator looks at the files while
// any call is held.
func (a *Authenticator) Hold(ctx context.Context) (held context.Context, release func()) {
	h := a.held
	if h == nil {
		return ctx, noRelease
	}
	p, ok := FromContext(ctx)
	if !ok {
		return ctx, noRelease // health, reflection: open to all
	}
	var (
		sum    [sha256.Size]byte
		keyed  bool
		chains [][]*x509.Certificate
	)
	if h.keys != nil && p.Method == MethodAPIKey {
		if key, err := apiKey(ctx); err == nil && key != "" {
			sum, keyed = sha256.Sum256([]byte(key)), true
		}
	}
	if h.crls != nil {
		chains = peerChains(ctx)
	}
	if !keyed && chains == nil {
		return ctx, noRelease
	}
	return h.hold(ctx, &heldCall{sum: sum, keyed: keyed, chains: chains})
}

// heldCall is a call that holds holds: what authenticated it, and what ends it; or a client
// connection (MeshTLS.ClientCredentials): the server's certificate, and what closes it.
type heldCall struct {
	sum    [sha256.Size]byte       // the SHA-256 of its API key, when keyed
	keyed  bool                    // it was made with an API key of the followed keys
	chains [][]*x509.Certificate   // the verified chains of its connection's client certificate, nil for none
	server bool                    // chains are the server's of a client connection, which cancel closes
	cancel context.CancelCauseFunc // ends it
}

// holds are the calls held (Authenticator.Hold, MeshTLS.Hold) that a followed keys file or a
// followed file of CRLs can revoke, and the client connections (MeshTLS.ClientCredentials)
// that the CRLs can revoke the server of. While it holds any, one goroutine (watch) gets the
// keys and the CRLs at every reload interval, so that the files are read again without a call
// to read them; each new set of keys (revokeKeys), and each new CRLs (revokeCerts), ends the
// calls and closes the connections they revoke.
type holds struct {
	keys *followed[keySet] // nil: no followed keys
	crls *crls             // nil: no CRLs

	mu       sync.Mutex
	calls    map[*heldCall]struct{}
	watching bool          // watch runs
	idle     chan struct{} // told by remove that no call is held, for watch to end now
	checked  *revocations  // the CRLs watch last checked the calls held against
}

// newHolds returns the holds of the followed keys (nil for none), which it tells of every new
// set of keys, and of the CRLs (nil for none).
func newHolds(keys *followed[keySet], crls *crls) *holds {
	h := &holds{keys: keys, crls: crls, calls: map[*heldCall]struct{}{}, idle: make(chan struct{}, 1)}
	if keys != nil {
		keys.loaded = h.revokeKeys
	}
	return h
}

// heldKey is the key of the value that marks the context of a call held (Held).
type heldKey struct{}

// Held reports whether ctx is the context of a call that Hold holds: one a revocation may end
// before its work does, whose handler must then return at once, leaving what goes on (a run)
// to a goroutine of its own.
func Held(ctx context.Context) bool {
	return ctx.Value(heldKey{}) != nil
}

// hold serves c in a context of its own, which ends when c is revoked; release stops
// holding it.
func (h *holds) hold(ctx context.Context, c *heldCall) (held context.Context, release func()) {
	held, c.cancel = context.WithCancelCause(ctx)
	held = context.WithValue(held, heldKey{}, c)
	h.add(c)
	return held, func() {
		h.remove(c)
		c.cancel(context.Canceled)
	}
}

// revokedCall is a call held and why it ends.
type revokedCall struct {
	call  *heldCall
	cause error
}

// add holds c, starting watch when it does not run; c ends at once if its key is gone already
// or its certificate revoked (after the call was authenticated, before it was held).
func (h *holds) add(c *heldCall) {
	h.mu.Lock()
	h.calls[c] = struct{}{}
	start := !h.watching
	h.watching = true
	h.mu.Unlock()
	if start {
		go h.watch()
	}
	if cause := h.revoked(c, h.currentKeys(), h.currentCRLs()); cause != nil {
		h.end([]revokedCall{{c, cause}})
	}
}

// currentKeys are the followed keys now, nil without them.
func (h *holds) currentKeys() *keySet {
	if h.keys == nil {
		return nil
	}
	return h.keys.get()
}

// currentCRLs are the CRLs now, nil without them.
func (h *holds) currentCRLs() *revocations {
	if h.crls == nil {
		return nil
	}
	return h.crls.current()
}

// revoked returns why c ends by the keys (nil: not checked against keys) and the CRLs (nil:
// not checked against CRLs), nil when neither revokes it.
func (h *holds) revoked(c *heldCall, keys *keySet, crls *revocations) error {
	if c.keyed && keys != nil {
		if _, ok := (*keys)[c.sum]; !ok {
			return revokedErr
		}
	}
	if c.chains != nil {
		if err := crls.listed(c.chains); err != nil {
			if c.server {
				return serverRevokedErr(err)
			}
			return certRevokedErr(err)
		}
	}
	return nil
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

// revokeKeys ends the calls held whose key set lacks.
func (h *holds) revokeKeys(set *keySet) {
	h.endRevoked(set, nil)
}

// revokeCerts ends the calls held whose certificate the CRLs now (crls) revoke, unless they are
// the ones the calls were last checked against.
func (h *holds) revokeCerts(crls *revocations) {
	h.mu.Lock()
	changed := crls != h.checked
	h.checked = crls
	h.mu.Unlock()
	if changed {
		h.endRevoked(nil, crls)
	}
}

// endRevoked ends the calls held that keys (nil: none checked) or crls (nil: none checked)
// revoke.
func (h *holds) endRevoked(keys *keySet, crls *revocations) {
	var gone []revokedCall
	h.mu.Lock()
	for c := range h.calls {
		if cause := h.revoked(c, keys, crls); cause != nil {
			gone = append(gone, revokedCall{c, cause})
		}
	}
	h.mu.Unlock()
	h.end(gone)
}

// end ends those of the calls (and closes those of the connections) that are still held, with
// their causes.
func (h *holds) end(calls []revokedCall) {
	keys, certs, servers := 0, 0, 0
	var cert, server error
	for _, r := range calls {
		if !h.remove(r.call) {
			continue
		}
		r.call.cancel(r.cause)
		switch {
		case errors.Is(r.cause, ErrKeyRevoked):
			keys++
		case r.call.server:
			servers, server = servers+1, r.cause
		default:
			certs, cert = certs+1, r.cause
		}
	}
	if keys > 0 {
		slog.Info("calls of a revoked API key ended", "calls", keys)
	}
	if certs > 0 {
		slog.Info("calls of a revoked client certificate ended", "calls", certs, "err", errors.Unwrap(cert))
	}
	if servers > 0 {
		slog.Info("connections to a server of a revoked certificate closed", "connections", servers, "err", errors.Unwrap(server))
	}
}

// minWatch is the shortest wait of watch between two looks at the files.
const minWatch = time.Millisecond

// untilCheck is how long until the keys or the CRLs are to be read again.
func (h *holds) untilCheck() time.Duration {
	d := time.Duration(1<<63 - 1)
	if h.keys != nil {
		d = h.keys.untilCheck()
	}
	if h.crls != nil {
		d = min(d, h.crls.untilCheck())
	}
	return max(d, minWatch)
}

// watch gets the keys and the CRLs whenever their reload interval has passed (followed.get
// reads the files again then: a new set of keys comes to revokeKeys, and new CRLs, read by
// watch or by a handshake meanwhile, to revokeCerts), for as long as a call or a connection is
// held.
func (h *holds) watch() {
	t := time.NewTimer(h.untilCheck())
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if h.keys != nil {
				h.keys.get()
			}
			if h.crls != nil {
				h.revokeCerts(h.crls.current())
			}
			t.Reset(h.untilCheck())
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

package auth

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/lru"
	"google.golang.org/grpc/peer"
)

// RefusalInterval is how often, at most, the refusals of one peer for one reason are logged at
// warning level: the first one as it happens, the next one once the interval has passed, with
// the number refused meanwhile.
const RefusalInterval = time.Minute

// maxRefusalKeys bounds the (peer, reason) pairs a refusal log remembers: past it the least
// recently refused pair is forgotten, and its next refusal is logged as a first one.
const maxRefusalKeys = 4096

// refusalKey is a peer (its IP address, whatever its port: a scanner opens a connection a try)
// and the reason of its refusal.
type refusalKey struct{ peer, reason string }

// refusalState is when a (peer, reason) was last logged and how many refusals were not since.
type refusalState struct {
	logged   time.Time
	unlogged int
}

// refusalLog logs refused calls in a bounded way: every caller that reaches a port can make
// calls that are refused, as fast as it likes, so each one is not worth a warning. The first
// refusal of a peer for a reason is a warning; the next ones within RefusalInterval are debug
// lines, counted in the next warning of that peer and reason ("unlogged").
type refusalLog struct {
	log  *slog.Logger
	now  func() time.Time
	mu   sync.Mutex
	seen *lru.Cache[refusalKey, *refusalState]
}

// newRefusalLog returns a refusal log writing to log.
func newRefusalLog(log *slog.Logger) *refusalLog {
	seen := lru.New[refusalKey, *refusalState](maxRefusalKeys, nil)
	return &refusalLog{log: log, now: time.Now, seen: seen}
}

// refused logs the refusal of the call of method in ctx with err, with attrs besides.
func (r *refusalLog) refused(ctx context.Context, method string, err error, attrs ...any) {
	r.record(ctx, "call refused", peerHost(ctx), err, append([]any{"method", method}, attrs...))
}

// refusedHandshake logs the refusal, in the TLS handshake, of the peer at addr (nil when
// unknown) with err: a revoked certificate.
func (r *refusalLog) refusedHandshake(addr net.Addr, err error) {
	host := ""
	if addr != nil {
		host = addr.String()
		if h, _, serr := net.SplitHostPort(host); serr == nil {
			host = h
		}
	}
	r.record(context.Background(), "TLS handshake refused", host, err, nil)
}

// record logs msg for the refusal of peer with err, with attrs first: a warning, or a debug
// line when the peer was refused for err less than RefusalInterval ago.
func (r *refusalLog) record(ctx context.Context, msg, peer string, err error, attrs []any) {
	key := refusalKey{peer: peer, reason: err.Error()}
	now := r.now()
	r.mu.Lock()
	st, ok := r.seen.Get(key)
	quiet := ok && now.Sub(st.logged) < RefusalInterval
	unlogged := 0
	switch {
	case quiet:
		st.unlogged++
	case ok:
		unlogged, st.logged, st.unlogged = st.unlogged, now, 0
	default:
		r.seen.Put(key, &refusalState{logged: now})
	}
	r.mu.Unlock()
	attrs = append(attrs, "peer", key.peer, "err", err)
	if quiet {
		r.log.DebugContext(ctx, msg, attrs...)
		return
	}
	if unlogged > 0 {
		attrs = append(attrs, "unlogged", unlogged)
	}
	r.log.WarnContext(ctx, msg, attrs...)
}

// peerHost is the address of the call's peer without its port, or "" when unknown.
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	addr := p.Addr.String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

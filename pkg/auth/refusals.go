package auth

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/agentmesh/agentmesh/pkg/ratelog"
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

// refusalLog logs refused calls in a bounded way: every caller that reaches a port can make
// calls that are refused, as fast as it likes, so each one is not worth a warning. The first
// refusal of a peer for a reason is a warning; the next ones within RefusalInterval are debug
// lines, counted in the next warning of that peer and reason ("unlogged").
type refusalLog struct {
	log *ratelog.Log[refusalKey]
}

// newRefusalLog returns a refusal log writing to log.
func newRefusalLog(log *slog.Logger) *refusalLog {
	return &refusalLog{log: ratelog.New[refusalKey](log, RefusalInterval, maxRefusalKeys)}
}

// refused logs the refusal of the call of method in ctx with err, with attrs besides.
func (r *refusalLog) refused(ctx context.Context, method string, err error, attrs ...any) {
	r.record(ctx, "call refused", peerHost(ctx), err, append([]any{"method", method}, attrs...))
}

// refusedHandshake logs the refusal, in the TLS handshake, of the peer at addr (nil when
// unknown) with err: a revoked certificate.
func (r *refusalLog) refusedHandshake(addr net.Addr, err error) {
	r.record(context.Background(), "TLS handshake refused", hostOf(addr), err, nil)
}

// record logs msg for the refusal of peer with err, with attrs first: a warning, or a debug
// line when the peer was refused for err less than RefusalInterval ago.
func (r *refusalLog) record(ctx context.Context, msg, peer string, err error, attrs []any) {
	key := refusalKey{peer: peer, reason: err.Error()}
	r.log.Warn(ctx, key, msg, append(attrs, "peer", key.peer, "err", err)...)
}

// peerHost is the address of the call's peer without its port, or "" when unknown.
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	return hostOf(p.Addr)
}

// hostOf is addr without its port, or "" for nil.
func hostOf(addr net.Addr) string {
	if addr == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

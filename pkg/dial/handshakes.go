package dial

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/lru"
	"github.com/agentmesh/agentmesh/pkg/ratelog"
	"google.golang.org/grpc/credentials"
)

// HandshakeLogInterval is how often, at most, a process logs at warning level the failed TLS
// handshakes with one target for one cause, to one logger: the first as it happens, the next
// once the interval has passed, with the number that failed meanwhile, on any of the
// connections that log to that logger.
const HandshakeLogInterval = time.Minute

// maxHandshakeCauses bounds the (target, cause) pairs remembered for one logger: past it the
// least recently failed pair is forgotten, and its next failure is logged as a first one.
const maxHandshakeCauses = 64

// maxHandshakeLoggers bounds the loggers whose failed handshakes the process remembers: past it
// the one least recently logged to is forgotten, and the next failure logged to it is logged as
// a first one.
const maxHandshakeLoggers = 64

// handshakeKey is a target (the authority dialled) and the cause of a failed handshake.
type handshakeKey struct{ target, cause string }

// handshakeLogs are the logs of failed handshakes of the process, one per logger they write to
// (nil: slog.Default()), shared by all the credentials that log to it: a process with several
// connections to one target (the orchestrator's clients of the stages, pools, replicas) logs
// one of its failures once per interval, not once per connection.
var handshakeLogs = struct {
	sync.Mutex
	byLogger *lru.Cache[*slog.Logger, *ratelog.Log[handshakeKey]]
}{byLogger: lru.New[*slog.Logger, *ratelog.Log[handshakeKey]](maxHandshakeLoggers, nil)}

// handshakeLog returns the log of the failed handshakes logged to log, made at its first use.
func handshakeLog(log *slog.Logger) *ratelog.Log[handshakeKey] {
	handshakeLogs.Lock()
	defer handshakeLogs.Unlock()
	l, ok := handshakeLogs.byLogger.Get(log)
	if !ok {
		l = ratelog.New[handshakeKey](log, HandshakeLogInterval, maxHandshakeCauses)
		handshakeLogs.byLogger.Put(log, l)
	}
	return l
}

// loggedHandshakes are transport credentials that log their failed handshakes in a bounded
// way. gRPC makes the handshake of a connection that failed again at every try of its backoff
// (every second at most, connectParams), for as long as calls wait for the peer: a server of
// another mesh identity, a certificate the server refuses, are logged as a warning once per
// HandshakeLogInterval for one target and cause, whichever of the process's connections that
// log to their logger fails, and each other try as a debug line, counted in the next warning
// ("unlogged"). gRPC's own log says it twice a try, as a warning of its logger, off unless
// GRPC_GO_LOG_SEVERITY_LEVEL turns it on.
type loggedHandshakes struct {
	credentials.TransportCredentials
	log    *slog.Logger               // nil: slog.Default() at each failure
	failed *ratelog.Log[handshakeKey] // log's, shared with every credentials logging to it
}

// logHandshakes returns creds logging their failed handshakes to log (nil: slog.Default()),
// within the limit of every credentials of the process that log to it.
func logHandshakes(creds credentials.TransportCredentials, log *slog.Logger) *loggedHandshakes {
	return &loggedHandshakes{TransportCredentials: creds, log: log, failed: handshakeLog(log)}
}

// ClientHandshake makes the handshake, and logs its failure.
func (h *loggedHandshakes) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := h.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil && ctx.Err() == nil { // a handshake cut short by the connection's end is none
		h.logFailure(ctx, authority, raw.RemoteAddr(), err)
	}
	return conn, info, err
}

// Clone returns credentials of their own, logging to the same logger, within its limit.
func (h *loggedHandshakes) Clone() credentials.TransportCredentials {
	return logHandshakes(h.TransportCredentials.Clone(), h.log)
}

// logFailure logs the failed handshake with the server at addr of target.
func (h *loggedHandshakes) logFailure(ctx context.Context, target string, addr net.Addr, err error) {
	key := handshakeKey{target: target, cause: handshakeCause(err)}
	attrs := []any{"target", target, "err", key.cause}
	if addr != nil {
		attrs = append(attrs, "addr", addr.String())
	}
	h.failed.Warn(ctx, key, "TLS handshake failed", attrs...)
}

// handshakeCause is the text of a failed handshake's error without what differs from one try to
// the next: the addresses, with the local port, of a network error in it ("read tcp
// 127.0.0.1:53066->127.0.0.1:7003: read: connection reset by peer" is "read: connection reset
// by peer"), so the tries of one cause are one.
func handshakeCause(err error) string {
	text := err.Error()
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		text = strings.Replace(text, op.Error(), op.Op+": "+op.Err.Error(), 1)
	}
	return text
}

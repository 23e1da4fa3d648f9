package dial

import (
	"log/slog"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Option configures New.
type Option func(*config)

// WithTracerProvider makes the connection's client spans with tp instead of the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracerProvider = tp }
}

// WithMeterProvider records the connection's client call metrics (rpc.client.call.duration)
// with mp instead of the global provider: a process serving several services on one
// provider, as agentmesh dev does, has no global one. A nil mp keeps the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meterProvider = mp }
}

// WithTimeout sets the deadline of unary calls whose context has none (default
// DefaultTimeout). A non-positive d keeps the default.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	}
}

// WithDialOptions adds gRPC dial options after the defaults, so they can override them (e.g. a
// bufconn dialer or a resolver in tests, TLS credentials).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOptions = append(c.dialOptions, opts...) }
}

// WithoutRetry turns off the retry of UNAVAILABLE calls, for RPCs that must not run twice.
func WithoutRetry() Option {
	return func(c *config) { c.retry = false }
}

// WithMaxMessageBytes sets the largest message the connection sends or receives (default
// DefaultMaxMessageBytes; the mesh's binaries give it grpc.max_message_bytes). A non-positive
// n keeps the default.
func WithMaxMessageBytes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.dialOptions = append(c.dialOptions, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(n), grpc.MaxCallSendMsgSize(n)))
		}
	}
}

// WithMesh makes the connection mutual TLS between services: it presents the service's
// certificate and accepts only a server of the mesh CA that names a mesh identity, one that
// WithPeer names when it is given (see auth.MeshTLS.ClientConfig). With CRLs (tls.crl) a
// connection to a server whose certificate they list once they are read again is closed, its
// calls in flight ending UNAVAILABLE, and its address connected to again, whose handshake
// refuses that server (see auth.MeshTLS.ClientCredentials). A nil m keeps the connection
// plaintext, as without mutual TLS configured.
func WithMesh(m *auth.MeshTLS) Option {
	return func(c *config) { c.mesh = m }
}

// WithPeer names the services whose mesh identities the server of a mutual TLS connection
// (WithMesh) may have: the service the connection is to (the memory stage's "memory"), and
// any identity more that serves it (a process serving every stage with one certificate).
// Each WithPeer adds to the names. Without it any mesh identity is accepted.
func WithPeer(services ...string) Option {
	return func(c *config) { c.peers = append(c.peers, services...) }
}

// WithLogger logs the failed TLS handshakes of a mutual TLS connection (WithMesh) to log, as a
// warning at most once per HandshakeLogInterval for one target and cause, however many
// connections of the process fail with it: they share the limit of every connection that logs
// to log (the same *slog.Logger: make one per service, not one per connection); nil (the
// default) logs them to slog.Default().
func WithLogger(log *slog.Logger) Option {
	return func(c *config) { c.logger = log }
}

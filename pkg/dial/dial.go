// Package dial opens gRPC client connections to the stages of the mesh, with the defaults every
// hop needs: round-robin load balancing over all resolved addresses, client-side health
// checking, retries of UNAVAILABLE, keepalive, a default deadline and OpenTelemetry spans;
// plaintext, or mutual TLS with WithMesh, whose failed handshakes are logged at most once a
// minute for a target and cause by all the connections of the process that log to one logger
// (HandshakeLogInterval). InProcess makes a connection to stages in the process.
package dial

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	_ "github.com/agentmesh/agentmesh/pkg/bufpool" // gRPC's buffers, not cleared on reuse
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"github.com/agentmesh/agentmesh/pkg/toolwire"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // registers the client-side health checker
	"google.golang.org/grpc/keepalive"
)

// DefaultTimeout is the deadline given to a unary call whose context has none.
const DefaultTimeout = 30 * time.Second

// serviceConfig balances over every address, checks the health of each, and retries calls
// that fail with UNAVAILABLE (the stage RPCs are idempotent).
const serviceConfig = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "healthCheckConfig": {"serviceName": ""},
  "methodConfig": [{
    "name": [{}],
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`

// serviceConfigWithoutRetry is serviceConfig without its retry policy.
const serviceConfigWithoutRetry = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "healthCheckConfig": {"serviceName": ""}
}`

// StreamWindow and ConnWindow are the HTTP/2 flow-control windows of the mesh's clients and
// servers (pkg/server): a stream may have 1 MiB in flight, a connection 4 MiB. Set, they turn
// off gRPC's estimate of the bandwidth-delay product, which pings the peer whenever data
// arrives and no ping is outstanding: on the mesh's short hops, nearly every call cost a ping
// and its ack more, two frames each written by a system call of its own (issue 15). At a
// round trip of a millisecond, 1 MiB in flight is a gigabyte a second per stream.
const (
	StreamWindow = 1 << 20
	ConnWindow   = 4 << 20
)

// keepaliveParams keep idle connections to peers alive and notice dead ones.
var keepaliveParams = keepalive.ClientParameters{
	Time:                30 * time.Second,
	Timeout:             10 * time.Second,
	PermitWithoutStream: true,
}

// New returns a client connection to target, a gRPC target such as "127.0.0.1:7003" or
// "dns:///planning.agentmesh.svc:7003". The connection is lazy: it connects on the first call.
func New(target string, opts ...Option) (*grpc.ClientConn, error) {
	target = strings.TrimSpace(target)
	if target == "" {
		return nil, errors.New("dial: empty target: give the peer's gRPC address, e.g. 127.0.0.1:7003 or dns:///host:7003")
	}
	cfg := config{timeout: DefaultTimeout, retry: true}
	for _, o := range opts {
		o(&cfg)
	}
	transport := insecure.NewCredentials()
	if cfg.mesh != nil {
		transport = logHandshakes(cfg.mesh.ClientCredentials(cfg.peers...), cfg.logger)
	}
	sc := serviceConfig
	if !cfg.retry {
		sc = serviceConfigWithoutRetry
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(cfg.handlerOptions()...)),
		grpc.WithDefaultServiceConfig(sc),
		grpc.WithKeepaliveParams(keepaliveParams),
		grpc.WithConnectParams(connectParams),
		grpc.WithInitialWindowSize(StreamWindow), grpc.WithInitialConnWindowSize(ConnWindow),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(DefaultMaxMessageBytes), grpc.MaxCallSendMsgSize(DefaultMaxMessageBytes),
			grpc.ForceCodecV2(toolwire.NewCodec())),
		grpc.WithChainUnaryInterceptor(defaultDeadline(cfg.timeout)),
	}
	if !cfg.retry {
		dialOpts = append(dialOpts, grpc.WithDisableRetry())
	}
	return grpc.NewClient(target, append(dialOpts, cfg.dialOptions...)...)
}

// handlerOptions configure the client spans of a connection.
func (c *config) handlerOptions() []otelgrpc.Option {
	handlerOpts := []otelgrpc.Option{otelgrpc.WithPropagators(telemetry.Propagator())}
	if c.tracerProvider != nil {
		handlerOpts = append(handlerOpts, otelgrpc.WithTracerProvider(c.tracerProvider))
	}
	if c.meterProvider != nil {
		handlerOpts = append(handlerOpts, otelgrpc.WithMeterProvider(c.meterProvider))
	}
	return handlerOpts
}

// DefaultMaxMessageBytes is the largest gRPC message the mesh's clients and servers send or
// receive unless configured otherwise (grpc.max_message_bytes; gRPC's own default is 4 MiB):
// a tool result of several megabytes reaches the observation stage, which truncates it,
// instead of failing the call.
const DefaultMaxMessageBytes = 32 << 20

// connectParams reconnect to a peer that went away at most a second apart (gRPC's default
// backoff grows to two minutes), so a stage that restarts is used again within a second of
// serving.
var connectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// defaultDeadline gives a unary call the timeout when its context has no deadline.
func defaultDeadline(timeout time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// config is what the options set.
type config struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	timeout        time.Duration
	dialOptions    []grpc.DialOption
	retry          bool
	mesh           *auth.MeshTLS // mutual TLS between services (WithMesh); nil: plaintext
	peers          []string      // the mesh identities the server may have (WithPeer)
	logger         *slog.Logger  // logs failed handshakes (WithLogger); nil: slog.Default()
}

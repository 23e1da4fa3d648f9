// Package server is the gRPC server every agentmesh service binary runs: OpenTelemetry spans
// and RPC metrics, panic recovery, stage error mapping, INVALID_ARGUMENT for requests that do
// not decode, message size limits, keepalive, the standard health and reflection services,
// and a graceful drain on shutdown; Main also serves the process's metrics on METRICS_ADDR.
// InProcess serves the same services to callers in the process, without the transport.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
)

// DefaultDrainTimeout is how long Shutdown lets in-flight RPCs finish before it cuts them off.
const DefaultDrainTimeout = 10 * time.Second

// Options configures a Server.
type Options struct {
	// Name is the service's name, reported SERVING by the health service (e.g. "intent").
	Name string
	// Addr is the address Start listens on, e.g. ":7001" or "127.0.0.1:0".
	Addr string
	// TracerProvider makes the server spans; nil means the global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider records the RPC metrics (rpc.server.call.duration per method and status
	// code); nil means the global provider.
	MeterProvider metric.MeterProvider
	// Logger logs panics and lifecycle events; nil means slog.Default().
	Logger *slog.Logger
	// DrainTimeout bounds the graceful drain of Shutdown; zero means DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Health, when set, tells whether the service can serve: the health service follows it
	// (SERVING or NOT_SERVING) from Serve until Shutdown. Without it every service is SERVING.
	Health HealthSource
	// Auth, when set, authenticates every call but health and reflection; the handler finds
	// the principal with auth.FromContext. A stream, or a unary call of LongCalls, whose API
	// key or client certificate is revoked while it is open ends UNAUTHENTICATED
	// (auth.Authenticator.Hold).
	Auth *auth.Authenticator
	// LongCalls are the full names of the unary methods ("/pkg.Service/Method") whose calls
	// may last as long as a run (the orchestrator's Run, which waits on it): with Auth, they
	// are held as streams are, so that a revoked API key or client certificate ends them. Other
	// unary calls are not held: a revocation refuses the next one.
	LongCalls []string
	// TLS, when set, serves TLS with this configuration (its ClientCAs verify client
	// certificates for mTLS).
	TLS *tls.Config
	// Mesh, when set, serves mutual TLS between services in the place of TLS: the server
	// presents the service's certificate, requires a client certificate of the mesh CA, and
	// takes calls but health only from mesh identities (auth.MeshTLS.Admission); the handler
	// finds the caller with auth.MeshIdentity. With the mesh CA's CRLs, a call on a connection
	// whose client certificate they revoke since its handshake is refused, and a call in
	// flight of such a certificate but health, unary or stream, ends UNAUTHENTICATED
	// (auth.MeshTLS.Hold). A stage's server has Mesh, the public API's Auth: not both.
	Mesh *auth.MeshTLS
	// MaxMessageBytes is the largest message the server receives or sends (a larger request
	// is refused with RESOURCE_EXHAUSTED); zero means dial.DefaultMaxMessageBytes.
	MaxMessageBytes int
}

// Server is a gRPC server with the mesh's standard services and its gate (panic recovery,
// authentication, undecodable requests, stage error mapping).
type Server struct {
	opts   Options
	log    *slog.Logger
	grpc   *grpc.Server
	health *health.Server

	stopHealth     chan struct{} // closed by Shutdown: stop following Options.Health
	stopHealthOnce sync.Once

	mu         sync.Mutex
	lis        net.Listener
	served     chan struct{} // closed when the goroutine of Start has returned; nil before Start
	err        error         // what Serve returned in that goroutine
	healthDone chan struct{} // closed when the follower of Options.Health has returned; nil without one
}

// enforcement lets clients ping every 10s, also without active RPCs (dial's keepalive).
var enforcement = keepalive.EnforcementPolicy{
	MinTime:             10 * time.Second,
	PermitWithoutStream: true,
}

// serverParams ping idle clients and age connections out, so that clients re-resolve and
// spread over new replicas; the grace is unbounded so that long streams finish.
var serverParams = keepalive.ServerParameters{
	Time:             time.Minute,
	Timeout:          20 * time.Second,
	MaxConnectionAge: 5 * time.Minute,
}

// streamWorkers is how many goroutines a server keeps to handle its calls (one per CPU, as
// grpc-go's measurements suggest), which a call takes before one of its own is started: a
// handler goes deep (interceptors, tracing, protobuf), and a new goroutine grew its stack,
// copying it, on every call, a twenty-fifth of the mesh's CPU per turn (issue 15).
func streamWorkers() uint32 { return uint32(runtime.GOMAXPROCS(0)) }

// New returns a Server whose gRPC server has the health and reflection services registered.
// Register the service's own implementation on GRPC() before calling Start or Serve.
func New(opts Options) *Server {
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = dial.DefaultMaxMessageBytes
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	gt := &gate{log: log, codec: newRequestCodec()}
	if opts.Mesh != nil {
		opts.TLS = opts.Mesh.ServerConfig()
		gt.admit = append(gt.admit, opts.Mesh.Admission(log))
		if opts.Mesh.Holds() {
			gt.hold, gt.holdUnary = opts.Mesh.Hold, everyMethod
		}
	}
	if opts.Auth != nil {
		gt.admit = append(gt.admit, opts.Auth.Admission(log))
		if opts.Auth.Holds() {
			authn := opts.Auth
			gt.hold = func(ctx context.Context, _ string) (context.Context, func()) { return authn.Hold(ctx) }
			gt.holdUnary = longCalls(opts.LongCalls)
		}
	}
	serverOpts := []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(handlerOptions(opts)...)),
		grpc.ForceServerCodecV2(gt.codec),
		grpc.UnaryInterceptor(gt.unary),
		grpc.StreamInterceptor(gt.stream),
		grpc.KeepaliveEnforcementPolicy(enforcement),
		grpc.KeepaliveParams(serverParams),
		grpc.MaxRecvMsgSize(opts.MaxMessageBytes),
		grpc.MaxSendMsgSize(opts.MaxMessageBytes),
		grpc.NumStreamWorkers(streamWorkers()),
		grpc.InitialWindowSize(dial.StreamWindow), grpc.InitialConnWindowSize(dial.ConnWindow),
	}
	if opts.TLS != nil {
		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(opts.TLS)))
	}
	g := grpc.NewServer(serverOpts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	return &Server{opts: opts, log: log, grpc: g, health: hs, stopHealth: make(chan struct{})}
}

// everyMethod holds the unary calls of every method: a stage's, whose calls (a model's
// answer, a tool's) last as long as they take.
func everyMethod(string) bool { return true }

// longCalls reports whether a unary method is one of methods, nil for none.
func longCalls(methods []string) func(string) bool {
	if len(methods) == 0 {
		return nil
	}
	set := make(map[string]bool, len(methods))
	for _, m := range methods {
		set[m] = true
	}
	return func(method string) bool { return set[method] }
}

// handlerOptions configure the server spans and RPC metrics of a server with opts.
func handlerOptions(opts Options) []otelgrpc.Option {
	handlerOpts := []otelgrpc.Option{otelgrpc.WithPropagators(telemetry.Propagator())}
	if opts.TracerProvider != nil {
		handlerOpts = append(handlerOpts, otelgrpc.WithTracerProvider(opts.TracerProvider))
	}
	if opts.MeterProvider != nil {
		handlerOpts = append(handlerOpts, otelgrpc.WithMeterProvider(opts.MeterProvider))
	}
	return handlerOpts
}

// GRPC returns the underlying gRPC server, for services to register on.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Start listens on Options.Addr and serves in a goroutine until Shutdown. When it cannot
// listen, it stops the server (its stream workers end) and returns the error.
func (s *Server) Start() error {
	lis, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		s.grpc.Stop()
		return fmt.Errorf("listen on %q: %w", s.opts.Addr, err)
	}
	served := make(chan struct{})
	s.mu.Lock()
	s.served = served
	s.mu.Unlock()
	s.setListener(lis)
	go func() {
		defer close(served)
		err := s.Serve(lis)
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}()
	return nil
}

// Serve reports every registered service SERVING (or, with Options.Health, what it says) and
// serves on lis until Shutdown; it blocks. It returns nil after a shutdown.
func (s *Server) Serve(lis net.Listener) error {
	s.setListener(lis)
	s.reportHealth()
	s.log.Info("serving", "service", s.opts.Name, "addr", lis.Addr().String())
	if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve %s: %w", s.opts.Name, err)
	}
	return nil
}

func (s *Server) setListener(lis net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lis = lis
}

// Addr returns the address the server listens on (the real port when Options.Addr asked for
// port 0), or "" before Start or Serve.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// Shutdown drains the server: it reports NOT_SERVING so that health-checking clients move
// away, stops accepting connections and lets in-flight RPCs finish. RPCs still running after
// Options.DrainTimeout, or when ctx ends, are cancelled. Shutdown returns once the server has
// stopped and the goroutine of Start has returned.
func (s *Server) Shutdown(ctx context.Context) {
	s.health.Shutdown()
	s.stopHealthOnce.Do(func() { close(s.stopHealth) })
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		s.grpc.GracefulStop()
	}()
	timer := time.NewTimer(s.opts.DrainTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		s.log.Warn("drain timed out, cancelling in-flight RPCs", "service", s.opts.Name, "timeout", s.opts.DrainTimeout)
		s.grpc.Stop()
	case <-ctx.Done():
		s.log.Warn("drain cut short, cancelling in-flight RPCs", "service", s.opts.Name, "cause", context.Cause(ctx))
		s.grpc.Stop()
	}
	<-stopped
	// Read once stopHealth is closed: a Serve that has not started its follower yet never will.
	s.mu.Lock()
	served, healthDone := s.served, s.healthDone
	s.mu.Unlock()
	if served != nil {
		<-served
	}
	if healthDone != nil {
		<-healthDone
	}
}

// serveErr returns what Serve returned in the goroutine of Start.
func (s *Server) serveErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

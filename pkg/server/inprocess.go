package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/fullstorydev/grpchan"
	"github.com/fullstorydev/grpchan/inprocgrpc"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// InProcess serves the services registered on it to callers in the same process, without a
// transport: each caller gets a Channel (an inprocgrpc channel) on which a call is a method call
// in a goroutine of its own, its messages copied instead of encoded and its outgoing metadata
// the handler's incoming metadata. It keeps what callers of a Server rely on: panic recovery,
// the mapping of stage errors to statuses with their details (pkg/stageerr), the server spans
// (in the caller's trace) and RPC metrics, and a drain on Shutdown.
//
// It leaves out what belongs to the transport: connections, HTTP/2 and the encoding of messages
// (so no request fails to decode, and Options.MaxMessageBytes bounds nothing), keepalive, and
// TLS and the authentication of callers (NewInProcess refuses Options.Auth, TLS and Mesh), as
// well as the health and reflection services, which have no caller in the process.
type InProcess struct {
	opts     Options
	log      *slog.Logger
	handlers grpchan.HandlerMap // the registered services, behind the drain and the gate
	stats    stats.Handler      // the server spans and RPC metrics

	mu       sync.Mutex
	stopping bool           // set by Shutdown: calls are refused from then on
	calls    sync.WaitGroup // the calls in flight
}

// NewInProcess returns an InProcess that serves as New(opts) would; of opts it uses Name,
// TracerProvider, MeterProvider, Logger and DrainTimeout. Options that authenticate callers
// (Auth, TLS, Mesh) are an error: in the process there is no transport to authenticate them on.
// Register the services on it before any call.
func NewInProcess(opts Options) (*InProcess, error) {
	if opts.Auth != nil || opts.TLS != nil || opts.Mesh != nil {
		return nil, errors.New("server: an in-process service cannot authenticate its callers: Options.Auth, TLS and Mesh must be unset")
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &InProcess{opts: opts, log: log, handlers: grpchan.HandlerMap{}, stats: otelgrpc.NewServerHandler(handlerOptions(opts)...)}, nil
}

// RegisterService registers a service and its implementation behind the drain and New's gate,
// less what depends on the transport: panic recovery and stage error mapping, without
// authentication or the check of undecodable requests.
func (p *InProcess) RegisterService(desc *grpc.ServiceDesc, impl any) {
	g := &gate{log: p.log}
	r := grpchan.WithUnaryInterceptors(p.handlers, p.trackUnary, g.unary)
	r = grpchan.WithStreamInterceptors(r, p.trackStream, g.stream)
	r.RegisterService(desc, impl)
}

// Channel returns a new channel to the registered services, for one caller: the caller adds
// its client side to it (dial.InProcess), as it would dial a Server.
func (p *InProcess) Channel() *inprocgrpc.Channel {
	ch := new(inprocgrpc.Channel).WithServerStatsHandler(p.stats)
	p.handlers.ForEach(ch.RegisterService)
	return ch
}

// Shutdown drains the services as Server.Shutdown does: calls made from now on are refused
// with UNAVAILABLE, and it waits for the calls in flight to finish, at most
// Options.DrainTimeout or until ctx ends. Unlike a server's, calls still running then are not
// cancelled (each ends with its caller's context); Shutdown logs them and returns.
func (p *InProcess) Shutdown(ctx context.Context) {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		p.calls.Wait()
	}()
	timer := time.NewTimer(p.opts.DrainTimeout)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		p.log.Warn("drain timed out, leaving in-process calls to their callers", "service", p.opts.Name, "timeout", p.opts.DrainTimeout)
	case <-ctx.Done():
		p.log.Warn("drain cut short, leaving in-process calls to their callers", "service", p.opts.Name, "cause", context.Cause(ctx))
	}
}

// begin counts a call in flight, or refuses it once Shutdown has begun; end counts it out.
func (p *InProcess) begin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return status.Errorf(codes.Unavailable, "the %s service is shutting down", p.opts.Name)
	}
	p.calls.Add(1)
	return nil
}

func (p *InProcess) trackUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := p.begin(); err != nil {
		return nil, err
	}
	defer p.calls.Done()
	return handler(ctx, req)
}

func (p *InProcess) trackStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := p.begin(); err != nil {
		return err
	}
	defer p.calls.Done()
	return handler(srv, ss)
}

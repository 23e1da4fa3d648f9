package auth

import (
	"context"
	"log/slog"
	"strings"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
)

// open reports whether a method is served without authentication: the health service (load
// balancers and probes) and reflection (the schema is public: it is in proto/).
func open(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.Health/") || strings.HasPrefix(method, "/grpc.reflection.")
}

// UnaryServerInterceptor authenticates every call but health and reflection, putting the
// principal in the handler's context; a call that fails is refused UNAUTHENTICATED and logged
// without its credentials.
func (a *Authenticator) UnaryServerInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if open(info.FullMethod) {
			return handler(ctx, req)
		}
		p, err := a.Authenticate(ctx)
		if err != nil {
			log.WarnContext(ctx, "call refused", "method", info.FullMethod, "err", err)
			return nil, stageerr.ToStatus(err)
		}
		return handler(NewContext(ctx, p), req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func (a *Authenticator) StreamServerInterceptor(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if open(info.FullMethod) {
			return handler(srv, ss)
		}
		p, err := a.Authenticate(ss.Context())
		if err != nil {
			log.WarnContext(ss.Context(), "call refused", "method", info.FullMethod, "err", err)
			return stageerr.ToStatus(err)
		}
		return handler(srv, &principalStream{ServerStream: ss, ctx: NewContext(ss.Context(), p)})
	}
}

// principalStream is a server stream whose context carries the principal.
type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context returns the stream's context with the principal.
func (s *principalStream) Context() context.Context { return s.ctx }

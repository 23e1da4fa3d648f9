package auth

import (
	"context"
	"log/slog"
	"strings"
)

// open reports whether a method is served without authentication: the health service (load
// balancers and probes) and reflection (the schema is public: it is in proto/).
func open(method string) bool {
	return strings.HasPrefix(method, "/grpc.health.v1.Health/") || strings.HasPrefix(method, "/grpc.reflection.")
}

// Admission decides whether a call of method may be served, and gives the context to serve it
// in: ctx, or ctx with the caller's principal. A call it refuses gets its error, which it has
// logged. pkg/server calls a server's admissions in one interceptor of its own.
type Admission func(ctx context.Context, method string) (context.Context, error)

// Admission authenticates every call but health and reflection, putting the principal in the
// handler's context; a call that fails is refused UNAUTHENTICATED and logged without its
// credentials, at warning level at most once per RefusalInterval for one peer and reason. With
// CRLs (RefuseRevoked), a call on a connection whose client certificate they revoke now is
// refused so too, whatever credentials it carries, as the handshake of a new connection would
// be refused.
func (a *Authenticator) Admission(log *slog.Logger) Admission {
	refusals := newRefusalLog(log)
	return func(ctx context.Context, method string) (context.Context, error) {
		if open(method) {
			return ctx, nil
		}
		if a.crls != nil {
			if err := a.crls.refuse(ctx); err != nil {
				refusals.refused(ctx, method, err)
				return nil, err
			}
		}
		p, err := a.Authenticate(ctx)
		if err != nil {
			refusals.refused(ctx, method, err)
			return nil, err
		}
		return NewContext(ctx, p), nil
	}
}

package server

import (
	"context"
	"log/slog"
	"runtime/debug"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gate is the one interceptor of every call a server serves, unary or streaming. In order, it
// turns a panic of the handler into INTERNAL, logged with the stack, so that one bad request
// does not take the service down; admits the call (authentication, auth.Admission); refuses a
// request that did not decode (INVALID_ARGUMENT, requestCodec); and maps the handler's errors
// to gRPC codes (pkg/stageerr).
//
// It is one interceptor rather than a chain of one per concern because every interceptor of a
// chain adds its frame and gRPC's between the server and the handler, for as long as the call
// lasts: with four, the generation stage's handler waiting on a streaming answer held 16 KiB of
// stack instead of 8 (the runtime halves a goroutine's stack only while a quarter of it is in
// use; issue 15).
type gate struct {
	log   *slog.Logger
	admit []auth.Admission
	// hold, when set, gives the context a stream is served in once admitted, and what to call
	// when it ends: auth.Authenticator.Hold, which ends a stream whose API key or client
	// certificate is revoked, or auth.MeshTLS.Hold, one whose client certificate is.
	hold func(ctx context.Context, method string) (context.Context, func())
	// holdUnary, when set with hold, reports whether a unary call of a method is held as
	// streams are: one that lasts as long as a run (Options.LongCalls), or every call of a stage
	// whose CRLs can revoke its caller. Without hold a unary call costs nothing more.
	holdUnary func(method string) bool
	codec     *requestCodec // nil: requests are not checked for decoding failures (in process)
}

// unary is the gate of a unary call.
func (g *gate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, g.recovered(ctx, info.FullMethod, p)
		}
	}()
	var undecoded error
	if g.codec != nil {
		// Taken before admission, which may refuse the call: the codec keeps the error until
		// it is taken.
		undecoded = g.codec.failure(req)
	}
	if ctx, err = g.admitted(ctx, info.FullMethod); err != nil {
		return nil, stageerr.ToStatus(err)
	}
	if undecoded != nil {
		return nil, stageerr.ToStatus(undecoded)
	}
	if g.hold != nil && g.holdUnary != nil && g.holdUnary(info.FullMethod) {
		return g.held(ctx, info.FullMethod, req, handler)
	}
	resp, err = handler(ctx, req)
	return resp, stageerr.ToStatus(err)
}

// held serves a long unary call as stream serves a stream: one whose API key or client
// certificate is revoked while it runs ends UNAUTHENTICATED, whatever its handler returned
// once its context ended.
func (g *gate) held(ctx context.Context, method string, req any, handler grpc.UnaryHandler) (any, error) {
	ctx, release := g.hold(ctx, method)
	defer release()
	resp, err := handler(ctx, req)
	if revoked := auth.RevokedError(ctx); revoked != nil {
		return nil, stageerr.ToStatus(revoked)
	}
	return resp, stageerr.ToStatus(err)
}

// stream is the gate of a streaming call: a streamed message that did not decode is RecvMsg's
// error (decodingStream). A stream whose API key or client certificate is revoked while it is
// open (hold) ends UNAUTHENTICATED, whatever its handler returned once its context ended.
func (g *gate) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = g.recovered(ss.Context(), info.FullMethod, p)
		}
	}()
	ctx, err := g.admitted(ss.Context(), info.FullMethod)
	if err != nil {
		return stageerr.ToStatus(err)
	}
	if g.hold != nil {
		var release func()
		ctx, release = g.hold(ctx, info.FullMethod)
		defer release()
	}
	if ctx != ss.Context() {
		ss = contextStream{ServerStream: ss, ctx: ctx}
	}
	if g.codec != nil {
		ss = decodingStream{ServerStream: ss, codec: g.codec}
	}
	err = handler(srv, ss)
	if revoked := auth.RevokedError(ctx); revoked != nil {
		err = revoked
	}
	return stageerr.ToStatus(err)
}

// admitted is the context the call of method is served in, once every admission took it.
func (g *gate) admitted(ctx context.Context, method string) (context.Context, error) {
	for _, admit := range g.admit {
		var err error
		if ctx, err = admit(ctx, method); err != nil {
			return nil, err
		}
	}
	return ctx, nil
}

// recovered logs a recovered panic and returns the error the client sees, which does not
// reveal the panic's value.
func (g *gate) recovered(ctx context.Context, method string, p any) error {
	g.log.ErrorContext(ctx, "panic in gRPC handler",
		"method", method,
		"panic", p,
		"stack", string(debug.Stack()),
	)
	return status.Errorf(codes.Internal, "internal error in %s", method)
}

// contextStream is a server stream served in a context of its own: its admission's.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

// Context returns the stream's context.
func (s contextStream) Context() context.Context { return s.ctx }

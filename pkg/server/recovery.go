package server

import (
	"context"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoverUnary turns a panic in a unary handler into an INTERNAL error and logs it with the
// stack, so that one bad request does not take the service down.
func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = recovered(ctx, log, info.FullMethod, p)
			}
		}()
		return handler(ctx, req)
	}
}

// recoverStream turns a panic in a streaming handler into an INTERNAL error and logs it with
// the stack.
func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = recovered(ss.Context(), log, info.FullMethod, p)
			}
		}()
		return handler(srv, ss)
	}
}

// recovered logs a recovered panic and returns the error the client sees, which does not
// reveal the panic's value.
func recovered(ctx context.Context, log *slog.Logger, method string, p any) error {
	log.ErrorContext(ctx, "panic in gRPC handler",
		"method", method,
		"panic", p,
		"stack", string(debug.Stack()),
	)
	return status.Errorf(codes.Internal, "internal error in %s", method)
}

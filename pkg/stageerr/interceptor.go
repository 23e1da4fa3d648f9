package stageerr

import (
	"context"

	"google.golang.org/grpc"
)

// UnaryServerInterceptor converts every error a unary handler returns with ToStatus.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		return resp, ToStatus(err)
	}
}

// StreamServerInterceptor converts every error a streaming handler returns with ToStatus.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return ToStatus(handler(srv, ss))
	}
}

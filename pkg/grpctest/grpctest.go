// Package grpctest serves gRPC services over an in-memory bufconn listener for tests, with the
// same error interceptors as production servers; it also picks loopback ports for servers a
// test starts later (FreePort), waits for a server's health and checks stage errors.
package grpctest

import (
	"context"
	"net"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// Serve starts a gRPC server on a bufconn listener, lets register add services to it, and
// returns a client connection to it. Server and connection stop when the test ends.
func Serve(t testing.TB, register func(grpc.ServiceRegistrar)) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(stageerr.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(stageerr.StreamServerInterceptor()),
	)
	register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	)
	if err != nil {
		t.Fatalf("dial bufconn: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-done
	})
	return conn
}

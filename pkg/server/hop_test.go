package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/server"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// BenchmarkHop is what one call from a service to another costs the mesh: an intent Parse
// answered at once, over loopback TCP, one call at a time, between a server of this package and
// a client of pkg/dial, with every span sampled and exported in batches (to nowhere) or
// without tracing, against the same call between a bare gRPC server and client (`benchstat
// -col /stack`): what the mesh's interceptors, codec, stats handlers and spans add to gRPC's
// own cost. A turn makes four such calls.
func BenchmarkHop(b *testing.B) {
	for _, tc := range []struct {
		stack   string
		tracing bool
	}{{"grpc", false}, {"mesh", false}, {"mesh", true}} {
		b.Run(fmt.Sprintf("stack=%s/tracing=%v", tc.stack, tc.tracing), func(b *testing.B) {
			var tp trace.TracerProvider = noop.NewTracerProvider()
			if tc.tracing {
				sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()), sdktrace.WithSampler(sdktrace.AlwaysSample()))
				b.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
				tp = sdk
			}
			var client intentv1.IntentServiceClient
			if tc.stack == "grpc" {
				client = intentv1.NewIntentServiceClient(bareHop(b))
			} else {
				client = intentv1.NewIntentServiceClient(meshHop(b, tp))
			}
			req := &intentv1.ParseRequest{Message: "What is 6 times 7?", UserId: "user-1", RunId: "run-1", AvailableTools: []string{"calculator"}}
			ctx, span := tp.Tracer("bench").Start(b.Context(), "agentmesh.run") // the calls' parent, as in the mesh
			defer span.End()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Parse(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// meshHop is a client of pkg/dial connected to a server of this package serving intentStub.
func meshHop(b *testing.B, tp trace.TracerProvider) *grpc.ClientConn {
	conn, err := dial.New(intentServer(b, tp), dial.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn
}

// intentServer starts a server of this package serving intentStub, stopped when tb ends, and
// returns its address; tp nil is the global tracer provider.
func intentServer(tb testing.TB, tp trace.TracerProvider) string {
	tb.Helper()
	srv := server.New(server.Options{Name: "intent", Addr: "127.0.0.1:0", TracerProvider: tp, Logger: slog.New(slog.DiscardHandler)})
	intentv1.RegisterIntentServiceServer(srv.GRPC(), &intentStub{})
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv.Addr()
}

// bareHop is a gRPC client with no options but its credentials, connected to a gRPC server with
// none, serving intentStub.
func bareHop(b *testing.B) *grpc.ClientConn {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	intentv1.RegisterIntentServiceServer(g, &intentStub{})
	go func() { _ = g.Serve(lis) }()
	b.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return conn
}

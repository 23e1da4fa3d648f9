package server

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"log/slog"
)

// TestDecodeFailuresAreAnsweredAndForgotten: requests that do not decode are INVALID_ARGUMENT,
// unary and on a bidirectional stream, and the codec keeps none of their errors afterwards.
func TestDecodeFailuresAreAnsweredAndForgotten(t *testing.T) {
	codec := newRequestCodec()
	gt := &gate{log: slog.New(slog.DiscardHandler), codec: codec}
	conn := rawConn(t, gt)
	garbage := []byte{0xff}

	for range 3 {
		var reply []byte
		err := conn.Invoke(t.Context(), "/grpc.health.v1.Health/Check", &garbage, &reply)
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("unary: %v, want INVALID_ARGUMENT", err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.SendMsg(&garbage); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	var reply []byte
	if err := stream.RecvMsg(&reply); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("stream: %v, want INVALID_ARGUMENT", err)
	}

	if n := kept(codec); n != 0 {
		t.Errorf("the codec still keeps %d decoding errors", n)
	}
}

// TestRefusedRequestsThatDoNotDecodeAreForgotten: a unary call that its admission refuses
// (UNAUTHENTICATED) with a request that does not decode leaves no decoding error in the codec,
// so that unauthenticated callers cannot grow the server's memory without bound.
func TestRefusedRequestsThatDoNotDecodeAreForgotten(t *testing.T) {
	codec := newRequestCodec()
	refuse := func(ctx context.Context, method string) (context.Context, error) {
		return nil, status.Error(codes.Unauthenticated, "no credentials")
	}
	gt := &gate{log: slog.New(slog.DiscardHandler), codec: codec, admit: []auth.Admission{refuse}}
	conn := rawConn(t, gt)
	garbage := []byte{0xff}

	for range 3 {
		var reply []byte
		err := conn.Invoke(t.Context(), "/grpc.health.v1.Health/Check", &garbage, &reply)
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("unary: %v, want UNAUTHENTICATED", err)
		}
	}
	if n := kept(codec); n != 0 {
		t.Errorf("the codec still keeps %d decoding errors of refused calls", n)
	}
}

// TestSecondRequestOfServerStreamIsForgotten: a server-streaming call whose client sends two
// requests, which gRPC refuses, leaves no decoding error of theirs in the codec.
func TestSecondRequestOfServerStreamIsForgotten(t *testing.T) {
	codec := newRequestCodec()
	gt := &gate{log: slog.New(slog.DiscardHandler), codec: codec}
	conn := rawConn(t, gt)
	garbage := []byte{0xff}

	for range 3 {
		ctx, cancel := context.WithCancel(t.Context())
		stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
			"/grpc.health.v1.Health/Watch")
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := stream.SendMsg(&garbage); err != nil && err != io.EOF {
				t.Fatal(err)
			}
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		var reply []byte
		err = stream.RecvMsg(&reply)
		if status.Code(err) == codes.OK {
			t.Fatalf("a call with two requests was answered")
		}
		cancel()
	}
	// The client can have its answer a moment before the server's handler has returned.
	left := kept(codec)
	for deadline := time.Now().Add(2 * time.Second); left != 0 && time.Now().Before(deadline); left = kept(codec) {
		runtime.Gosched()
	}
	if left != 0 {
		t.Errorf("the codec still keeps %d decoding errors", left)
	}
}

// rawConn serves the health and reflection services through gt, whose codec decodes their
// requests, and returns a client that sends raw bytes as requests.
func rawConn(t *testing.T, gt *gate) *grpc.ClientConn {
	t.Helper()
	g := grpc.NewServer(grpc.ForceServerCodecV2(gt.codec), grpc.UnaryInterceptor(gt.unary), grpc.StreamInterceptor(gt.stream))
	healthpb.RegisterHealthServer(g, health.NewServer())
	reflection.Register(g)
	conn, err := grpc.NewClient(serve(t, g), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpctest.RawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// kept counts the decoding errors codec keeps.
func kept(codec *requestCodec) int {
	n := 0
	codec.failed.Range(func(any, any) bool { n++; return true })
	return n
}

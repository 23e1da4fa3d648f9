package server

import (
	"context"
	"log/slog"
	"net"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestDecodingDoesNotGrowAWaitingHandlersStack: a streaming handler that waits deep in a call
// (as generation's waits in net/http for its model) holds no more stack for a deeply nested
// request (a tool schema's Struct) than for a flat one: the request is decoded on a goroutine
// of its own, so its recursion does not grow the handler's stack, which the runtime would not
// shrink back while the handler waits that deep.
func TestDecodingDoesNotGrowAWaitingHandlersStack(t *testing.T) {
	const streams = 200
	client, waiting, release := deepWaitServer(t)
	flat := stackPerWaitingStream(t, client, waiting, release, streams, nested(1))
	deep := stackPerWaitingStream(t, client, waiting, release, streams, nested(60))
	t.Logf("stack per waiting stream: %.0f B for a flat request, %.0f B for a nested one", flat, deep)
	if deep-flat > 10<<10 {
		t.Errorf("a nested request costs its waiting handler %.0f B more stack than a flat one", deep-flat)
	}
}

// waitDesc is a server-streaming method whose handler receives a Struct, then waits for
// release at about waitDepth bytes of stack below its first frame.
func waitDesc(waiting *atomic.Int64, release *sync.Cond, released *bool) grpc.ServiceDesc {
	return grpc.ServiceDesc{
		ServiceName: "test.Deep",
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    "Wait",
			ServerStreams: true,
			Handler: func(_ any, stream grpc.ServerStream) error {
				if err := stream.RecvMsg(new(structpb.Struct)); err != nil {
					return err
				}
				descend(waitDepth/frameBytes, func() {
					waiting.Add(1)
					release.L.Lock()
					for !*released {
						release.Wait()
					}
					release.L.Unlock()
					waiting.Add(-1)
				})
				return nil
			},
		}},
	}
}

// waitDepth is how deep the handlers wait: deep enough that the runtime does not halve a stack
// that decoding grew to 32 KiB or more (a quarter of 32 KiB in use), while a handler that
// waits this deep without such a decoding needs 16 KiB. Without the race detector, whose
// instrumentation changes frames and noise, the difference is then 16 KiB either way.
const waitDepth = 8 << 10

// frameBytes is the stack frame of descend, about.
const frameBytes = 256

// descend calls fn n frames of about frameBytes deeper.
//
//go:noinline
func descend(n int, fn func()) byte {
	var pad [frameBytes - 64]byte
	pad[n%len(pad)] = byte(n)
	if n <= 0 {
		fn()
		return pad[0]
	}
	return descend(n-1, fn) + pad[n%len(pad)]
}

// deepWaitServer serves waitDesc behind the server's codec and its gate, and
// returns a client of it, the count of handlers waiting, and a function that releases them.
func deepWaitServer(t *testing.T) (*grpc.ClientConn, *atomic.Int64, func()) {
	codec := newRequestCodec()
	gt := &gate{log: slog.New(slog.DiscardHandler), codec: codec}
	g := grpc.NewServer(grpc.ForceServerCodecV2(codec), grpc.StreamInterceptor(gt.stream))
	waiting := new(atomic.Int64)
	cond := sync.NewCond(new(sync.Mutex))
	released := false
	desc := waitDesc(waiting, cond, &released)
	g.RegisterService(&desc, nil)
	client, err := grpc.NewClient(serve(t, g), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client, waiting, func() {
		cond.L.Lock()
		released = true
		cond.L.Unlock()
		cond.Broadcast()
		// Later waves wait again.
		for waiting.Load() > 0 {
			runtime.Gosched()
		}
		cond.L.Lock()
		released = false
		cond.L.Unlock()
	}
}

// serve serves g on a loopback port until the test ends, and returns its address.
func serve(t *testing.T, g *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-served
	})
	return lis.Addr().String()
}

// stackPerWaitingStream opens n streams sending req, and returns the goroutine stack memory
// the process holds per stream once every handler waits.
func stackPerWaitingStream(t *testing.T, client *grpc.ClientConn, waiting *atomic.Int64, release func(), n int, req *structpb.Struct) float64 {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	before := stackBytes()
	var wg sync.WaitGroup
	for range n {
		stream, err := client.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/test.Deep/Wait")
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.SendMsg(req); err != nil {
			t.Fatal(err)
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = stream.RecvMsg(new(structpb.Struct)) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for waiting.Load() < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d handlers wait", waiting.Load(), n)
		}
		runtime.Gosched()
	}
	after := stackBytes()
	release()
	wg.Wait()
	return float64(after-before) / float64(n)
}

// stackBytes is the memory of goroutine stacks after collections that shrink the stacks the
// runtime can shrink (each halves a stack at most once).
func stackBytes() int64 {
	for range 4 {
		runtime.GC()
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// nested is a Struct nested depth levels deep, as a JSON schema of nested objects is.
func nested(depth int) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("string")}}
	for range depth - 1 {
		s = &structpb.Struct{Fields: map[string]*structpb.Value{
			"type":       structpb.NewStringValue("object"),
			"properties": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"inner": structpb.NewStructValue(s)}}),
		}}
	}
	return s
}

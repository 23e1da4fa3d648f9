package dial_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// intent answers Parse with its name after running parse, if set.
type intent struct {
	intentv1.UnimplementedIntentServiceServer
	name  string
	parse func(ctx context.Context) error
	calls atomic.Int32
}

func (s *intent) Parse(ctx context.Context, _ *intentv1.ParseRequest) (*intentv1.ParseResponse, error) {
	s.calls.Add(1)
	if s.parse != nil {
		if err := s.parse(ctx); err != nil {
			return nil, err
		}
	}
	return &intentv1.ParseResponse{Goal: s.name}, nil
}

// serve starts a gRPC server of opts with srv and the health service on a loopback port until
// the test ends, and returns its address and health server.
func serve(t *testing.T, srv *intent, opts ...grpc.ServerOption) (string, *health.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	intentv1.RegisterIntentServiceServer(g, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String(), hs
}

// client dials target with opts and closes the connection when the test ends.
func client(t *testing.T, target string, opts ...dial.Option) intentv1.IntentServiceClient {
	t.Helper()
	conn, err := dial.New(target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return intentv1.NewIntentServiceClient(conn)
}

func TestEmptyTarget(t *testing.T) {
	for _, target := range []string{"", "   "} {
		conn, err := dial.New(target)
		if err == nil {
			_ = conn.Close()
			t.Fatalf("New(%q) succeeded", target)
		}
		if !strings.Contains(err.Error(), "empty target") {
			t.Errorf("New(%q) error %q does not say the target is empty", target, err)
		}
	}
}

func TestDeadlines(t *testing.T) {
	const timeout = 2 * time.Second
	table := []struct {
		name string
		ctx  func(context.Context) (context.Context, context.CancelFunc)
		// check judges the time left that the server saw.
		check func(left time.Duration) bool
		want  string
	}{
		{
			name:  "default deadline applied",
			ctx:   func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) },
			check: func(left time.Duration) bool { return left > 0 && left <= timeout },
			want:  "in (0, 2s]",
		},
		{
			name: "caller deadline kept",
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, time.Hour)
			},
			check: func(left time.Duration) bool { return left > dial.DefaultTimeout && left <= time.Hour },
			want:  "in (30s, 1h]",
		},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			left := make(chan time.Duration, 1)
			hasDeadline := make(chan bool, 1)
			addr, _ := serve(t, &intent{parse: func(ctx context.Context) error {
				d, ok := ctx.Deadline()
				hasDeadline <- ok
				left <- time.Until(d)
				return nil
			}})
			c := client(t, addr, dial.WithTimeout(timeout))
			ctx, cancel := tc.ctx(t.Context())
			defer cancel()
			if _, err := c.Parse(ctx, &intentv1.ParseRequest{Message: "hi"}); err != nil {
				t.Fatal(err)
			}
			if !<-hasDeadline {
				t.Fatal("the server saw no deadline")
			}
			if got := <-left; !tc.check(got) {
				t.Errorf("server saw %v left, want %s", got, tc.want)
			}
		})
	}
}

func TestRetryUnavailable(t *testing.T) {
	table := []struct {
		name         string
		opts         []dial.Option
		wantCode     codes.Code
		wantAttempts int32
	}{
		{"retried until it succeeds", nil, codes.OK, 3},
		{"without retry", []dial.Option{dial.WithoutRetry()}, codes.Unavailable, 1},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			srv := &intent{}
			srv.parse = func(context.Context) error {
				if srv.calls.Load() <= 2 {
					return status.Error(codes.Unavailable, "warming up")
				}
				return nil
			}
			addr, _ := serve(t, srv)
			c := client(t, addr, tc.opts...)
			_, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: "hi"})
			if got := status.Code(err); got != tc.wantCode {
				t.Errorf("code = %v (%v), want %v", got, err, tc.wantCode)
			}
			if got := srv.calls.Load(); got != tc.wantAttempts {
				t.Errorf("server saw %d attempts, want %d", got, tc.wantAttempts)
			}
		})
	}
}

func TestRoundRobinAndHealth(t *testing.T) {
	a, b := &intent{name: "a"}, &intent{name: "b"}
	addrA, healthA := serve(t, a)
	addrB, _ := serve(t, b)
	r := manual.NewBuilderWithScheme("stages")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: addrA}, {Addr: addrB}}})
	c := client(t, r.Scheme()+":///intent", dial.WithDialOptions(grpc.WithResolvers(r)))

	call := func() string {
		t.Helper()
		resp, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetGoal()
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.calls.Load() == 0 || b.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("calls never spread over both servers: a=%d b=%d", a.calls.Load(), b.calls.Load())
		}
		call()
	}

	// A server that reports NOT_SERVING stops receiving calls.
	healthA.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	for streak := 0; streak < 10; {
		if time.Now().After(deadline) {
			t.Fatal("calls still reach the server that is NOT_SERVING")
		}
		if call() == "b" {
			streak++
		} else {
			streak = 0
		}
	}
}

// TestMaxMessageBytes: a connection receives answers of up to DefaultMaxMessageBytes, over
// gRPC's own 4 MiB, and WithMaxMessageBytes sets another limit, over which an answer is
// RESOURCE_EXHAUSTED.
func TestMaxMessageBytes(t *testing.T) {
	addr, _ := serve(t, &intent{name: strings.Repeat("x", 5<<20)})
	if _, err := client(t, addr).Parse(t.Context(), &intentv1.ParseRequest{}); err != nil {
		t.Fatalf("a 5 MiB answer with the default limit: %v", err)
	}
	_, err := client(t, addr, dial.WithMaxMessageBytes(4<<20)).Parse(t.Context(), &intentv1.ParseRequest{})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 5 MiB answer over a 4 MiB limit: %v, want RESOURCE_EXHAUSTED", err)
	}
}

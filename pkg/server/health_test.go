package server_test

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/server"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// switchable is a HealthSource a test turns on and off.
type switchable struct {
	mu      sync.Mutex
	serving bool
	changed chan struct{}
}

func newSwitchable(serving bool) *switchable {
	return &switchable{serving: serving, changed: make(chan struct{})}
}

func (s *switchable) Serving() (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serving, s.changed
}

func (s *switchable) set(serving bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serving = serving
	close(s.changed)
	s.changed = make(chan struct{})
}

// healthClient is a client of f's health service that, unlike pkg/dial's connections, does
// not itself check health: it reaches a server that reports NOT_SERVING.
func healthClient(t *testing.T, f *fixture) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(f.srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// watchHealth watches the health of service and returns a function that receives its next
// status.
func watchHealth(t *testing.T, hc healthpb.HealthClient, service string) func() healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel) // before the server's drain, which waits for the watch
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	return func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := watch.Recv()
		if err != nil {
			t.Fatalf("health watch of %q: %v", service, err)
		}
		return resp.GetStatus()
	}
}

func TestHealthFollowsItsSource(t *testing.T) {
	src := newSwitchable(false)
	f := start(t, server.Options{Name: "intent", Health: src})
	hc := healthClient(t, f)
	for _, name := range []string{"", "intent", "agentmesh.intent.v1.IntentService"} {
		resp, err := hc.Check(t.Context(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("Check(%q) = %v, %v; want NOT_SERVING while the source says so", name, resp, err)
		}
	}
	next := watchHealth(t, hc, "intent")
	if got := next(); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("first status = %v, want NOT_SERVING", got)
	}
	for _, serving := range []bool{true, false, true} {
		src.set(serving)
		want := healthpb.HealthCheckResponse_NOT_SERVING
		if serving {
			want = healthpb.HealthCheckResponse_SERVING
		}
		if got := next(); got != want {
			t.Fatalf("status after the source turned %v = %v, want %v", serving, got, want)
		}
	}
}

func TestWrappedRegistrarsKeepTheirHealthAndClose(t *testing.T) {
	src := newSwitchable(true)
	closed := 0
	r := server.WithClose(server.WithHealth(newIntentStub(), src), func() error { closed++; return nil })
	h, ok := r.(interface {
		Unwrap() server.Registrar
	})
	if !ok {
		t.Fatal("WithClose's Registrar does not unwrap")
	}
	if _, ok := h.Unwrap().(server.HealthSource); !ok {
		t.Fatal("WithHealth's Registrar is not a HealthSource")
	}
	if err := r.(interface{ Close() error }).Close(); err != nil || closed != 1 {
		t.Fatalf("Close = %v after %d cleanups, want 1", err, closed)
	}
}

// closable is a HealthSource whose owner closes it once the server has shut down, as Main
// closes the service; it counts the calls that come after. Its changed channel is closed, so
// a follower asks it again and again until it stops.
type closable struct {
	mu     sync.Mutex
	closed bool
	late   int
}

func (c *closable) Serving() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		c.late++
	}
	changed := make(chan struct{})
	close(changed)
	return true, changed
}

func (c *closable) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

func (c *closable) callsAfterClose() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.late
}

// TestServeAfterShutdownLeavesTheHealthSourceAlone: a Serve that begins once Shutdown has
// begun (Start's goroutine when Shutdown comes right after Start) neither asks the
// HealthSource nor starts following it. Such a Serve started the follower that Shutdown had
// already looked for, so Shutdown did not wait for it, and it asked the source after Main had
// closed the service.
func TestServeAfterShutdownLeavesTheHealthSourceAlone(t *testing.T) {
	src := &closable{}
	srv := server.New(server.Options{Health: src, Logger: slog.New(slog.DiscardHandler)})
	srv.Shutdown(t.Context())
	src.close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(lis); err != nil {
		t.Fatalf("Serve after Shutdown = %v, want nil", err)
	}
	if n := src.callsAfterClose(); n != 0 {
		t.Errorf("the HealthSource was asked %d times after it was closed", n)
	}
}

// TestShutdownRightAfterStartOutlastsTheHealthFollower: Shutdown right after Start returns
// only when the follower of the HealthSource has returned, wherever Start's Serve was when
// Shutdown began, so the source is never asked once it is closed. The stray followers of a
// defect are waited for (goleak), and their calls then counted.
func TestShutdownRightAfterStartOutlastsTheHealthFollower(t *testing.T) {
	sources := make([]*closable, 100)
	for i := range sources {
		sources[i] = &closable{}
		srv := server.New(server.Options{Addr: "127.0.0.1:0", Health: sources[i], Logger: slog.New(slog.DiscardHandler)})
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		srv.Shutdown(t.Context())
		sources[i].close()
	}
	goleak.VerifyNone(t)
	late := 0
	for _, src := range sources {
		late += src.callsAfterClose()
	}
	if late != 0 {
		t.Errorf("HealthSources were asked %d times after they were closed", late)
	}
}

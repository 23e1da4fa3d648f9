package server_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/server"
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

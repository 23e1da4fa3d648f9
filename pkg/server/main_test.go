package server

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// closer is a Registrar with nothing to register that records being closed.
type closer struct{ closed atomic.Bool }

func (*closer) Register(*grpc.Server) {}

func (c *closer) Close() error {
	c.closed.Store(true)
	return nil
}

func TestRunExitCodes(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	ok := func(context.Context) (Registrar, error) { return &closer{}, nil }
	table := []struct {
		name  string
		env   map[string]string
		build func(context.Context) (Registrar, error)
		want  int
	}{
		{"build fails", nil, func(context.Context) (Registrar, error) { return nil, errors.New("no store") }, exitcode.Failed},
		{"build finds bad config", nil, func(context.Context) (Registrar, error) {
			return nil, exitcode.Wrap(exitcode.Invalid, errors.New("MEMORY_ADDR is empty"))
		}, exitcode.Invalid},
		{"address in use", map[string]string{"LISTEN_ADDR": busy.Addr().String()}, ok, exitcode.Unavailable},
		{"bad tracing config", map[string]string{"OTEL_SDK_DISABLED": "", "OTEL_TRACES_EXPORTER": "zipkin"}, ok, exitcode.Invalid},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_SDK_DISABLED", "true")
			t.Setenv("LISTEN_ADDR", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if got := run("intent", "127.0.0.1:0", tc.build); got != tc.want {
				t.Errorf("run = %d, want %d", got, tc.want)
			}
		})
	}
}

// listenOnFreeAddr points LISTEN_ADDR at a free loopback address, which it returns, and turns
// tracing off, for run.
func listenOnFreeAddr(t *testing.T) string {
	t.Helper()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	t.Setenv("OTEL_SDK_DISABLED", "true")
	t.Setenv("LISTEN_ADDR", addr)
	return addr
}

func TestRunServesUntilSignal(t *testing.T) {
	addr := listenOnFreeAddr(t)

	svc := &closer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run("intent", "127.0.0.1:0", func(context.Context) (Registrar, error) { return svc, nil })
	}()

	conn, err := dial.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: "intent"})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service never reported SERVING on LISTEN_ADDR %s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exited; code != exitcode.OK {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if !svc.closed.Load() {
		t.Error("the service was not closed after the drain")
	}
}

func TestRunReportsTheRegistrarsHealth(t *testing.T) {
	addr := listenOnFreeAddr(t)

	ready := make(chan struct{}) // closed when the service can serve
	health := HealthFunc(func() (bool, <-chan struct{}) {
		select {
		case <-ready:
			return true, nil
		default:
			return false, ready
		}
	})
	svc := &closer{}
	closedToo := false
	exited := make(chan int, 1)
	go func() {
		exited <- run("orchestrator", "127.0.0.1:0", func(context.Context) (Registrar, error) {
			return WithClose(WithHealth(svc, health), func() error { closedToo = true; return nil }), nil
		})
	}()

	// A plain client: pkg/dial's connections check health themselves and fail while
	// NOT_SERVING.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitStatus := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
			if err == nil && resp.GetStatus() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health never reported %v: %v, %v", want, resp, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitStatus(healthpb.HealthCheckResponse_NOT_SERVING)
	close(ready)
	waitStatus(healthpb.HealthCheckResponse_SERVING)

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exited; code != exitcode.OK {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if !svc.closed.Load() || !closedToo {
		t.Errorf("closed the service %v and the extra cleanup %v, want both", svc.closed.Load(), closedToo)
	}
}

func TestEnv(t *testing.T) {
	t.Setenv("MEMORY_ADDR", "10.0.0.7:7008")
	if got := Env("MEMORY_ADDR", "127.0.0.1:7008"); got != "10.0.0.7:7008" {
		t.Errorf("Env(set) = %q", got)
	}
	t.Setenv("MEMORY_ADDR", "")
	if got := Env("MEMORY_ADDR", "127.0.0.1:7008"); got != "127.0.0.1:7008" {
		t.Errorf("Env(empty) = %q, want the default", got)
	}
}

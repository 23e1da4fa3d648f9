package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentmesh/agentmesh/pkg/events"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHealthFollowsTheEventStore runs the orchestrator binary against a NATS server that
// goes away and comes back, with its store and then without: the orchestrator reports
// NOT_SERVING while run events cannot be stored and SERVING again once they can.
func TestHealthFollowsTheEventStore(t *testing.T) {
	work := t.TempDir()
	bin := filepath.Join(work, "orchestrator")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfgFile := filepath.Join(work, "agentmesh.yaml")
	if err := os.WriteFile(cfgFile, []byte("nats:\n  stream_max_age_ms: 3600000\n  stream_max_bytes: 1048576\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	srv := startNATS(t, store, -1)
	port := srv.Port()

	addr := freeAddr(t)
	cmd := exec.Command(bin)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+work, "AGENTMESH_CONFIG="+cfgFile, "NATS_URL="+srv.ClientURL(),
		"LISTEN_ADDR="+addr, "OTEL_SDK_DISABLED=true")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("orchestrator logs:\n%s", logs.String())
		}
	})

	health := healthClient(t, addr)
	waitStatus(t, health, healthpb.HealthCheckResponse_SERVING)
	assertStreamLimits(t, srv, time.Hour, 1<<20)

	srv.Shutdown()
	waitStatus(t, health, healthpb.HealthCheckResponse_NOT_SERVING)
	srv = startNATS(t, store, port)
	waitStatus(t, health, healthpb.HealthCheckResponse_SERVING)

	srv.Shutdown()
	waitStatus(t, health, healthpb.HealthCheckResponse_NOT_SERVING)
	srv = startNATS(t, t.TempDir(), port) // NATS lost its store: the stream is created again
	waitStatus(t, health, healthpb.HealthCheckResponse_SERVING)
	assertStreamLimits(t, srv, time.Hour, 1<<20) // with the configured limits, by the one publisher

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the orchestrator did not exit cleanly on SIGTERM: %v", err)
	}
}

// startNATS starts an embedded NATS server on port (-1: a free one) with its store in dir.
func startNATS(t *testing.T, dir string, port int) *events.Embedded {
	t.Helper()
	srv, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// assertStreamLimits fails unless the event stream on srv has the configured limits.
func assertStreamLimits(t *testing.T, srv *events.Embedded, maxAge time.Duration, maxBytes int64) {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), events.StreamName)
	if err != nil {
		t.Fatalf("event stream: %v", err)
	}
	if cfg := s.CachedInfo().Config; cfg.MaxAge != maxAge || cfg.MaxBytes != maxBytes {
		t.Errorf("event stream max age %v, max bytes %d; want the configured %v, %d", cfg.MaxAge, cfg.MaxBytes, maxAge, maxBytes)
	}
}

// freeAddr returns a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// healthClient is a health client of addr that does not check health itself, so that it
// reaches a server that reports NOT_SERVING.
func healthClient(t *testing.T, addr string) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// waitStatus polls the server's health until it reports want.
func waitStatus(t *testing.T, health healthpb.HealthClient, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == want {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("health never reported %v (last %v, %v)", want, resp.GetStatus(), err)
		}
	}
}

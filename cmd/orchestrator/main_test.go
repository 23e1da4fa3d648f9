package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// build builds the orchestrator binary into dir and returns its path.
func build(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "orchestrator")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestRejectsAReplicaNameNoHeartbeatCanHold: a replica's name is a key of the replicas'
// heartbeat bucket; a name that cannot be one stops the binary at start with the invalid
// configuration's exit code, naming the variable and the rule.
func TestRejectsAReplicaNameNoHeartbeatCanHold(t *testing.T) {
	work := t.TempDir()
	cmd := exec.CommandContext(t.Context(), build(t, work))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+work, "AGENTMESH_REPLICA=orchestrator 1", "NATS_URL=nats://127.0.0.1:1", "OTEL_SDK_DISABLED=true")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitcode.Invalid {
		t.Fatalf("exit = %v, want code %d\n%s", err, exitcode.Invalid, out)
	}
	if !strings.Contains(string(out), `AGENTMESH_REPLICA: replica name \"orchestrator 1\": must be letters, digits`) {
		t.Errorf("output does not name the variable and the rule:\n%s", out)
	}
}

// TestRejectsASigningKeyItCannotRead: approvals.signing_key names a file that cannot be read:
// a configuration error (exit 4) naming the setting; it exited 3, as if NATS could not be
// reached.
func TestRejectsASigningKeyItCannotRead(t *testing.T) {
	work := t.TempDir()
	cfg := filepath.Join(work, "agentmesh.yaml")
	if err := os.WriteFile(cfg, []byte("approvals:\n  signing_key: "+filepath.Join(work, "grant.key")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startNATS(t, t.TempDir(), grpctest.FreePort(t))
	cmd := exec.CommandContext(t.Context(), build(t, work))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+work, "AGENTMESH_CONFIG="+cfg, "NATS_URL="+srv.ClientURL(), "LISTEN_ADDR="+grpctest.FreeAddr(t), "OTEL_SDK_DISABLED=true")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitcode.Invalid {
		t.Fatalf("exit = %v, want code %d\n%s", err, exitcode.Invalid, out)
	}
	if !strings.Contains(string(out), "approvals.signing_key") {
		t.Errorf("output does not name the setting:\n%s", out)
	}
}

// TestHealthFollowsTheEventStore runs the orchestrator binary against a NATS server that
// goes away and comes back, with its store and then without: the orchestrator reports
// NOT_SERVING while run events cannot be stored and SERVING again once they can.
func TestHealthFollowsTheEventStore(t *testing.T) {
	work := t.TempDir()
	bin := build(t, work)
	cfgFile := filepath.Join(work, "agentmesh.yaml")
	if err := os.WriteFile(cfgFile, []byte("nats:\n  stream_max_age_ms: 3600000\n  stream_max_bytes: 1048576\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	port := grpctest.FreePort(t) // below the ephemeral range: no connection takes it while NATS is down
	srv := startNATS(t, store, port)

	addr := grpctest.FreeAddr(t)
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

	health := grpctest.HealthClient(t, addr)
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)
	assertStreamLimits(t, srv, time.Hour, 1<<20)

	srv.Shutdown()
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_NOT_SERVING)
	srv = startNATS(t, store, port)
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)

	srv.Shutdown()
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_NOT_SERVING)
	srv = startNATS(t, t.TempDir(), port) // NATS lost its store: the stream is created again
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)
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

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestMemoryStageNotReadyWhileItsDatabaseIsDown: the memory binary on PostgreSQL reports
// NOT_SERVING, and its health command (the image's readiness probe with mTLS) exits 1, while
// its database cannot be reached, and SERVING again once it can; it stays up meanwhile. The
// database is put out of reach by cutting a proxy in front of the shared test server. It
// reported SERVING throughout, so callers and readiness probes kept sending it calls that
// could only fail.
func TestMemoryStageNotReadyWhileItsDatabaseIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the memory stage as a separate process")
	}
	isolate(t)
	proxy, dsn := storetest.NewProxy(t, storetest.PostgresDSN(t))
	cfg := filepath.Join(t.TempDir(), "agentmesh.yaml")
	yaml := fmt.Appendf(nil, "memory:\n  store: postgres\n  dsn: %q\n", dsn)
	if err := os.WriteFile(cfg, yaml, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(meshproc.Build(t), "memory")
	env := []string{"AGENTMESH_CONFIG=" + cfg, "OTEL_SDK_DISABLED=true"}
	stage := meshproc.External(t, "memory", bin, nil, env, nil)
	probe := func() int {
		cmd := exec.CommandContext(t.Context(), bin, "health")
		cmd.Env = append(env, "LISTEN_ADDR="+stage.Addr(), "HOME="+t.TempDir())
		err := cmd.Run()
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			return exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	}

	proxy.Cut()
	stage.WaitHealth(t, healthpb.HealthCheckResponse_NOT_SERVING)
	if code := probe(); code != exitcode.Failed {
		t.Errorf("database down: `memory health` exits %d, want %d (not serving)", code, exitcode.Failed)
	}
	proxy.Mend()
	stage.WaitHealth(t, healthpb.HealthCheckResponse_SERVING)
	if code := probe(); code != exitcode.OK {
		t.Errorf("database back: `memory health` exits %d, want 0", code)
	}
}

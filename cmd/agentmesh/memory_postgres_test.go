package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// postgresMemoryConfig writes a configuration of the memory stage on PostgreSQL at dsn and
// returns the memory binary and the environment that gives it that configuration.
func postgresMemoryConfig(t *testing.T, dsn string) (bin string, env []string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "agentmesh.yaml")
	yaml := fmt.Appendf(nil, "memory:\n  store: postgres\n  dsn: %q\n", dsn)
	if err := os.WriteFile(cfg, yaml, 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(meshproc.Build(t), "memory"),
		[]string{"AGENTMESH_CONFIG=" + cfg, "OTEL_SDK_DISABLED=true"}
}

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
	bin, env := postgresMemoryConfig(t, dsn)
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

// TestMemoryStageStartsWhileItsDatabaseIsDown runs the memory binary on PostgreSQL while its
// database is out of reach (a cut proxy in front of it): the stage starts NOT_SERVING, as it
// reports an outage of the database once running, instead of exiting (which crash-looped its
// pods until the database was back); its calls fail STORAGE_ERROR. Once the database answers,
// it creates its schema, reports SERVING and stores, and it exits 0 on SIGTERM.
func TestMemoryStageStartsWhileItsDatabaseIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the memory stage as a separate process")
	}
	isolate(t)
	proxy, dsn := storetest.NewProxy(t, storetest.PostgresDSN(t))
	proxy.Cut()
	bin, env := postgresMemoryConfig(t, dsn)
	stage := meshproc.Launch(t, "memory", bin, nil, env, nil)
	client := memoryv1.NewMemoryServiceClient(stage.Conn())
	req := &memoryv1.StoreRequest{UserId: "alice",
		Content: &typev1.Message{Role: typev1.Role_ROLE_USER, Content: "my locker is number 12"}}

	stage.WaitHealth(t, healthpb.HealthCheckResponse_NOT_SERVING)
	_, err := client.Store(t.Context(), req)
	grpctest.WantStageError(t, err, codes.Unavailable,
		typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR)

	proxy.Mend()
	stage.WaitHealth(t, healthpb.HealthCheckResponse_SERVING)
	if _, err := client.Store(t.Context(), req); err != nil {
		t.Fatalf("Store once the database answers: %v", err)
	}
	found, err := client.Search(t.Context(), &memoryv1.SearchRequest{UserId: "alice", Query: "locker"})
	if err != nil || len(found.GetHits()) != 1 {
		t.Fatalf("Search once the database answers = %v, %v; want the memory stored", found, err)
	}
	if err := stage.Stop(t); err != nil {
		t.Errorf("the memory stage did not exit cleanly on SIGTERM: %v", err)
	}
}

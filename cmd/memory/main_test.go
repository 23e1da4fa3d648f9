package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartsWhileThePostgresDatabaseIsUnreachable runs the memory binary on PostgreSQL while
// its database is out of reach (a cut proxy in front of it): the stage starts NOT_SERVING, as
// it reports an outage of the database once running, instead of exiting (which crash-looped
// its pods until the database was back); its calls fail STORAGE_ERROR. Once the database
// answers, it creates its schema, reports SERVING and stores.
func TestStartsWhileThePostgresDatabaseIsUnreachable(t *testing.T) {
	proxy, dsn := storetest.NewProxy(t, storetest.PostgresDSN(t))
	proxy.Cut()
	work := t.TempDir()
	bin := filepath.Join(work, "memory")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := filepath.Join(work, "agentmesh.yaml")
	yaml := "memory:\n  store: postgres\n  dsn: " + strconv.Quote(dsn) + "\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := grpctest.FreeAddr(t)
	cmd := exec.Command(bin)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+work, "AGENTMESH_CONFIG="+cfg, "LISTEN_ADDR="+addr,
		"OTEL_SDK_DISABLED=true")
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
			t.Logf("memory logs:\n%s", logs.String())
		}
	})
	health := grpctest.HealthClient(t, addr)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := memoryv1.NewMemoryServiceClient(conn)
	req := &memoryv1.StoreRequest{UserId: "alice",
		Content: &typev1.Message{Role: typev1.Role_ROLE_USER, Content: "my locker is number 12"}}

	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_NOT_SERVING)
	_, err = client.Store(t.Context(), req)
	grpctest.WantStageError(t, err, codes.Unavailable,
		typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR)

	proxy.Mend()
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)
	if _, err := client.Store(t.Context(), req); err != nil {
		t.Fatalf("Store once the database answers: %v", err)
	}
	found, err := client.Search(t.Context(), &memoryv1.SearchRequest{UserId: "alice", Query: "locker"})
	if err != nil || len(found.GetHits()) != 1 {
		t.Fatalf("Search once the database answers = %v, %v; want the memory stored", found, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the memory stage did not exit cleanly on SIGTERM: %v", err)
	}
}

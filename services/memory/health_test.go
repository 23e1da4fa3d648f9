package memory_test

import (
	"log/slog"
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestPostgresNotServingWhileTheDatabaseIsUnreachable: every memory call reads or writes the
// database, so a memory stage on PostgreSQL whose database cannot be reached serves nothing
// (each call fails STORAGE_ERROR). Its gRPC health says so, NOT_SERVING, for balancers and
// readiness probes to move away, and SERVING again once the database answers. The database is
// put out of reach by cutting a proxy in front of it: its connections are dropped and new
// ones refused.
func TestPostgresNotServingWhileTheDatabaseIsUnreachable(t *testing.T) {
	proxy, dsn := storetest.NewProxy(t, storetest.PostgresDSN(t))
	store, err := memory.OpenPostgres(t.Context(), dsn, postgresMaxConns)
	if err != nil {
		t.Fatal(err)
	}
	svc := memory.New(memory.Options{Store: store})
	t.Cleanup(func() { _ = svc.Close() })
	// As server.Main does for cmd/memory: a service that is a HealthSource has its health told.
	source, _ := any(svc).(server.HealthSource)
	srv := server.New(server.Options{Name: "memory", Addr: "127.0.0.1:0", Health: source,
		Logger: slog.New(slog.DiscardHandler)})
	svc.Register(srv.GRPC())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(t.Context()) })
	health := grpctest.HealthClient(t, srv.Addr())
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := memoryv1.NewMemoryServiceClient(conn)
	store1 := &memoryv1.StoreRequest{UserId: "u", Content: &typev1.Message{Content: "the sky is blue"}}

	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)
	if _, err := client.Store(t.Context(), store1); err != nil {
		t.Fatalf("Store with the database up: %v", err)
	}

	proxy.Cut()
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_NOT_SERVING)
	_, err = client.Store(t.Context(), store1)
	grpctest.WantStageError(t, err, codes.Unavailable,
		typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR)

	proxy.Mend()
	grpctest.WaitHealth(t, health, healthpb.HealthCheckResponse_SERVING)
	if _, err := client.Store(t.Context(), store1); err != nil {
		t.Fatalf("Store once the database is back: %v", err)
	}
}

package mesh_test

import (
	"errors"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The memory stage of the mesh reports its store's health on gRPC, as the memory binary does:
// on a PostgreSQL database whose rows break the unique index its upgrade builds, the stage
// fails for good (Mesh.Failed yields the *memory.IndexError, which `agentmesh dev` exits
// with) and is NOT_SERVING. The mesh served the stage's health without its store's: SERVING
// throughout, while the database was down, while an upgrade built its indexes, and after it
// failed.
func TestMemoryStageHealthFollowsItsStore(t *testing.T) {
	cfg := config.Default()
	cfg.Memory.Store, cfg.Memory.DSN = "postgres", storetest.PostgresWithDuplicates(t)
	h := start(t, cfg)
	select {
	case err := <-h.mesh.Failed():
		if ierr := (*memory.IndexError)(nil); !errors.As(err, &ierr) {
			t.Fatalf("the mesh failed with %v, want a *memory.IndexError", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the mesh has not failed within 30s")
	}
	grpctest.WaitHealth(t, grpctest.HealthClient(t, h.mesh.Addr(mesh.Memory)),
		healthpb.HealthCheckResponse_NOT_SERVING)
}

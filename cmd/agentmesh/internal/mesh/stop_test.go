package mesh_test

import (
	"net"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// TestAStoppedStageKeepsItsAddress: a stage stopped to see how the mesh copes with its outage
// keeps its address until the mesh closes, refusing every connection. Left free, another
// process's server (a test package running beside) took the port, and the orchestrator's
// calls met a server that did not know the stage's service: a broken stage, not one down.
func TestAStoppedStageKeepsItsAddress(t *testing.T) {
	h := start(t, nil)
	addr := h.mesh.Addr(mesh.Intent)
	if err := h.mesh.Stop(t.Context(), mesh.Intent); err != nil {
		t.Fatal(err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		_ = ln.Close()
		t.Fatalf("the stopped stage's address %s is free for another server", addr)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = intentv1.NewIntentServiceClient(conn).Parse(t.Context(), &intentv1.ParseRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("a call to the stopped stage = %v, want UNAVAILABLE", err)
	}
}

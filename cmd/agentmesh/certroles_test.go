package main

import (
	"context"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestOrchestratorGrantsTheRolesOfMappedOUs: the orchestrator binary with auth.client_ou_roles
// grants a client certificate only the roles of its mapped organizational units: OU=admin,
// which a CA may write for another purpose, is no admin, and OU=agentmesh-admins, mapped to
// admin, is one (only an admin may act for another user).
func TestOrchestratorGrantsTheRolesOfMappedOUs(t *testing.T) {
	isolate(t)
	clients := meshproc.NewPKI(t, t.TempDir())
	unmapped := clients.Issue(t, "carol", certs.Subject{CommonName: "carol", Organization: "acme",
		OrganizationalUnits: []string{"admin"}, Client: true})
	mapped := clients.Issue(t, "dave", certs.Subject{CommonName: "dave", Organization: "acme",
		OrganizationalUnits: []string{"agentmesh-admins"}, Client: true})
	m := meshproc.Start(t, meshproc.Options{MTLS: true, PKI: clients, Replicas: []string{meshproc.Orchestrator},
		Config: meshproc.Config{ClientCA: clients.CAFile(), ClientOURoles: map[string]string{"agentmesh-admins": "admin"}}})
	replica := m.Replica(t, meshproc.Orchestrator)
	decideFor := func(pair certs.Pair, user string) error {
		return callOnce(t, replica.Addr(), m.PKI().Client(t, pair), func(ctx context.Context, c grpc.ClientConnInterface) error {
			_, err := agentv1.NewAgentServiceClient(c).Decide(ctx, &agentv1.DecideRequest{Message: "hi", UserId: user})
			return err
		})
	}
	if err := decideFor(unmapped, "acme/carol"); err != nil {
		t.Fatalf("the certificate of OU=admin, for its own user: %v", err)
	}
	if err := decideFor(unmapped, "acme/bob"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the certificate of OU=admin (unmapped) acting for acme/bob: %v, want PERMISSION_DENIED", err)
	}
	if err := decideFor(mapped, "acme/bob"); err != nil {
		t.Errorf("the certificate of OU=agentmesh-admins (mapped to admin) acting for acme/bob: %v, want it taken", err)
	}
}

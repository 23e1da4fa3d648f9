package auth_test

import (
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
)

// TestClientConfigVerifiesThePeersIdentity: a connection to the memory stage accepts a server
// of the mesh CA only with the memory stage's mesh identity (or another the caller names):
// the planning stage's certificate, of the same CA, is refused, naming both identities. Any
// mesh identity of the CA was accepted as any service, so one stage's certificate (its
// stage compromised, or the certificate stolen) could answer the calls meant for another,
// reading the runs' conversations and memories. Without names any mesh identity is accepted.
// A refusal is an *auth.ServerCertError naming the server's identity.
func TestClientConfigVerifiesThePeersIdentity(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("mesh CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	meshOf := func(service string) *auth.MeshTLS {
		t.Helper()
		p, err := ca.Write(dir, service, certs.Service(service))
		if err != nil {
			t.Fatal(err)
		}
		m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: caFile, Cert: p.Cert, Key: p.Key}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	caller := meshOf("context")
	memory := serveTLS(t, meshOf("memory").ServerConfig())
	planning := serveTLS(t, meshOf("planning").ServerConfig())
	handshake := func(addr string, cfg *tls.Config) error {
		c, err := tls.Dial("tcp", addr, cfg)
		if err == nil {
			_ = c.Close()
		}
		return err
	}

	if err := handshake(memory, caller.ClientConfig("memory")); err != nil {
		t.Errorf("the memory stage, called as the memory stage: %v", err)
	}
	err = handshake(planning, caller.ClientConfig("memory"))
	if err == nil || !strings.Contains(err.Error(), "planning's (spiffe://agentmesh/planning)") ||
		!strings.Contains(err.Error(), "(spiffe://agentmesh/memory)") {
		t.Errorf("the planning stage, called as the memory stage: %v, want it refused naming both", err)
	}
	// The client tells the refusal by its type, not its text (the CLI's exit 4, not 3).
	var refused *auth.ServerCertError
	if !errors.As(err, &refused) || refused.Service != "planning" {
		t.Errorf("the planning stage, called as the memory stage: %#v, want a *auth.ServerCertError of planning", err)
	}
	if err := handshake(planning, caller.ClientConfig("memory", "planning")); err != nil {
		t.Errorf("the planning stage, called as the memory stage or itself: %v", err)
	}
	if err := handshake(planning, caller.ClientConfig()); err != nil {
		t.Errorf("the planning stage, called with no identity expected: %v", err)
	}
}

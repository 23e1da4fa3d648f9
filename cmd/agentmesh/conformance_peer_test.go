package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// TestConformanceRequiresTheStagesIdentity: with mutual TLS, `agentmesh conformance --stage
// planning` takes only a server of the planning stage's mesh identity (or the CLI's own), as
// the orchestrator does: the planning binary serving with a certificate of another identity
// of the mesh CA, "planning-canary", is exit 4 naming that identity and --peer, and passes
// its kit with --peer naming it (as spiffe://agentmesh/planning-canary or planning-canary).
// The kit took any mesh identity, so it checked whatever answered at the address. A --peer
// that is not a mesh identity, one without TLS_CA and one for the orchestrator are exit 4.
func TestConformanceRequiresTheStagesIdentity(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	isolate(t)
	pki := meshproc.NewPKI(t, t.TempDir())
	canary := pki.Issue(t, "planning-canary", certs.Service("planning-canary"))
	harness := pki.Client(t, pki.Issue(t, "harness", certs.Subject{CommonName: "harness", Client: true}))
	stage := meshproc.External(t, "planning-canary", filepath.Join(meshproc.Build(t), "planning"), nil,
		append(os.Environ(), "TLS_CA="+pki.CAFile(), "TLS_CERT="+canary.Cert, "TLS_KEY="+canary.Key), harness)

	for _, args := range [][]string{
		{"--peer", "Not/An/Identity"},
		{"--peer", "spiffe://elsewhere/planning"},
	} {
		if _, errOut, code := conformance(t, append([]string{"--stage", "planning", "--addr", stage.Addr()}, args...)...); code != exitcode.Invalid ||
			!strings.Contains(errOut, "is not a mesh identity") {
			t.Errorf("conformance %v: exit %d, want %d saying it is not a mesh identity\n%s", args, code, exitcode.Invalid, errOut)
		}
	}
	if _, errOut, code := conformance(t, "--stage", "planning", "--addr", stage.Addr(), "--peer", "planning-canary"); code != exitcode.Invalid ||
		!strings.Contains(errOut, "TLS_CA") {
		t.Errorf("--peer without TLS_CA: exit %d, want %d naming TLS_CA\n%s", code, exitcode.Invalid, errOut)
	}

	kit := pki.Issue(t, "kit", certs.Service(meshproc.Orchestrator)) // the orchestrator's identity
	t.Setenv("TLS_CA", pki.CAFile())
	t.Setenv("TLS_CERT", kit.Cert)
	t.Setenv("TLS_KEY", kit.Key)
	if _, errOut, code := conformance(t, "--stage", "orchestrator", "--addr", stage.Addr(), "--peer", "planning"); code != exitcode.Invalid ||
		!strings.Contains(errOut, "--peer") {
		t.Errorf("--peer of the orchestrator: exit %d, want %d\n%s", code, exitcode.Invalid, errOut)
	}

	out, errOut, code := conformance(t, "--stage", "planning", "--addr", stage.Addr())
	if code != exitcode.Invalid || !strings.Contains(errOut, "spiffe://agentmesh/planning-canary") ||
		!strings.Contains(errOut, "--peer spiffe://agentmesh/planning-canary") {
		t.Errorf("a planning stage of another identity: exit %d, want %d naming it and --peer\n%s%s", code, exitcode.Invalid, out, errOut)
	}
	for _, peer := range []string{"spiffe://agentmesh/planning-canary", "planning-canary"} {
		passesConformance(t, "planning", stage.Addr(), "--peer", peer)
	}
}

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
)

// TestIngestOverMutualTLS (issue 12.3): `agentmesh ingest` calls the memory stage of a mesh
// with mutual TLS between services as the service whose certificate TLS_CERT and TLS_KEY name;
// without them it cannot reach the stage, and TLS_CA alone is an invalid configuration.
func TestIngestOverMutualTLS(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.TLS = writeServiceCerts(t, t.TempDir(), "mesh CA")
	m := startMesh(t, cfg)
	docsDir := writeFiles(t, docs)
	ingest := []string{"ingest", "--addr", m.Addr(mesh.Memory), "--user", "alice", docsDir}

	t.Setenv("TLS_CA", "")
	t.Setenv("TLS_CERT", "")
	t.Setenv("TLS_KEY", "")
	runCLI(t, 3, ingest...)
	t.Setenv("TLS_CA", cfg.TLS.CA)
	if _, errOut := runCLI(t, 4, ingest...); !strings.Contains(errOut, "TLS_CERT") {
		t.Errorf("ingest with TLS_CA alone: %s", errOut)
	}
	t.Setenv("TLS_CERT", cfg.TLS.Cert)
	t.Setenv("TLS_KEY", cfg.TLS.Key)
	if out, _ := runCLI(t, 0, ingest...); !strings.Contains(out, "2 file(s)") {
		t.Errorf("ingest over mutual TLS: %s", out)
	}
}

// TestIngestWithAnotherCAExits4: `agentmesh ingest` whose TLS_CA did not sign the memory
// stage's certificate fails its TLS handshake, which gRPC reports UNAVAILABLE: it exited 3 and
// asked whether `agentmesh dev` was running, while it was, and the fault was TLS_CA.
func TestIngestWithAnotherCAExits4(t *testing.T) {
	isolate(t)
	meshDir, otherDir := t.TempDir(), t.TempDir()
	cfg := config.Default()
	cfg.TLS = writeServiceCerts(t, meshDir, "mesh CA")
	m := startMesh(t, cfg)
	other := writeServiceCerts(t, otherDir, "another CA")
	t.Setenv("TLS_CA", other.CA)
	t.Setenv("TLS_CERT", other.Cert)
	t.Setenv("TLS_KEY", other.Key)
	_, errOut := runCLI(t, 4, "ingest", "--addr", m.Addr(mesh.Memory), "--user", "alice",
		writeFiles(t, docs))
	if !strings.Contains(errOut, "TLS_CA") || strings.Contains(errOut, "is `agentmesh dev` running") {
		t.Errorf("the error does not name TLS_CA:\n%s", errOut)
	}
}

// TestIngestRefusesAnotherServiceAsMemory: `agentmesh ingest` hands its documents only to a
// server whose mesh certificate is the memory stage's, or its own (`agentmesh dev` serves every
// stage with one certificate); another service's certificate of the same CA (a stage's, stolen
// or its stage compromised) cannot take them. It accepted any mesh identity, where the stages
// that call the memory stage accept only its.
func TestIngestRefusesAnotherServiceAsMemory(t *testing.T) {
	isolate(t)
	pki := meshproc.NewPKI(t, t.TempDir())
	issue := func(service string) config.TLS {
		p := pki.Issue(t, service, certs.Service(service))
		return config.TLS{CA: pki.CAFile(), Cert: p.Cert, Key: p.Key}
	}
	cfg := config.Default()
	cfg.TLS = issue("planning") // a process serving the memory API as the planning stage
	m := startMesh(t, cfg)
	cli := issue("orchestrator")
	t.Setenv("TLS_CA", cli.CA)
	t.Setenv("TLS_CERT", cli.Cert)
	t.Setenv("TLS_KEY", cli.Key)
	_, errOut := runCLI(t, 4, "ingest", "--addr", m.Addr(mesh.Memory), "--user", "alice",
		writeFiles(t, docs))
	if !strings.Contains(errOut, "planning") {
		t.Errorf("the error does not name the server's identity:\n%s", errOut)
	}
}

// writeServiceCerts writes into dir a new CA named name and the orchestrator's certificate it
// signs, and returns them as a service's TLS settings.
func writeServiceCerts(t *testing.T, dir, name string) config.TLS {
	t.Helper()
	ca, err := certs.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	own, err := ca.Write(dir, "orchestrator", certs.Service("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	return config.TLS{CA: caFile, Cert: own.Cert, Key: own.Key}
}

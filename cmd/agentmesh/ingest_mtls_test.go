package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
)

// TestIngestOverMutualTLS (issue 12.3): `agentmesh ingest` calls the memory stage of a mesh
// with mutual TLS between services as the service whose certificate TLS_CERT and TLS_KEY name;
// without them it cannot reach the stage, and TLS_CA alone is an invalid configuration.
func TestIngestOverMutualTLS(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	ca, err := certs.NewCA("mesh CA")
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
	cfg := config.Default()
	cfg.TLS = config.TLS{CA: caFile, Cert: own.Cert, Key: own.Key}
	m := startMesh(t, cfg)
	docsDir := writeFiles(t, docs)
	ingest := []string{"ingest", "--addr", m.Addr(mesh.Memory), "--user", "alice", docsDir}

	t.Setenv("TLS_CA", "")
	t.Setenv("TLS_CERT", "")
	t.Setenv("TLS_KEY", "")
	runCLI(t, 3, ingest...)
	t.Setenv("TLS_CA", caFile)
	if _, errOut := runCLI(t, 4, ingest...); !strings.Contains(errOut, "TLS_CERT") {
		t.Errorf("ingest with TLS_CA alone: %s", errOut)
	}
	t.Setenv("TLS_CERT", own.Cert)
	t.Setenv("TLS_KEY", own.Key)
	if out, _ := runCLI(t, 0, ingest...); !strings.Contains(out, "2 file(s)") {
		t.Errorf("ingest over mutual TLS: %s", out)
	}
}

package main

import (
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/stagetest"
)

// TestConformanceBinaries: each of the nine services, run as its own binary (cmd/<service>)
// in a separate process wired only by the variables the binaries read, with the default
// configuration (the built-in rules model), passes its conformance kit through the CLI, at the
// address it listens on: in plaintext, and with mutual TLS between the services, where the
// CLI calls the stages with the orchestrator's certificate (TLS_CA, TLS_CERT, TLS_KEY) and the
// public API over TLS (AGENTMESH_CA).
func TestConformanceBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	for _, mtls := range []bool{false, true} {
		name := "plaintext"
		if mtls {
			name = "mtls"
		}
		t.Run(name, func(t *testing.T) {
			isolate(t)
			m := meshproc.Start(t, meshproc.Options{MTLS: mtls, Replicas: []string{meshproc.Orchestrator}})
			if pki := m.PKI(); pki != nil {
				own := pki.Service(meshproc.Orchestrator)
				t.Setenv("TLS_CA", pki.CAFile())
				t.Setenv("TLS_CERT", own.Cert)
				t.Setenv("TLS_KEY", own.Key)
				t.Setenv(envCA, pki.CAFile())
			}
			for _, stage := range stagetest.Stages() {
				t.Run(stage, func(t *testing.T) {
					service := m.Replica(t, meshproc.Orchestrator)
					if stage != meshproc.Orchestrator {
						service = m.Stage(t, stage)
					}
					passesConformance(t, stage, service.Addr())
				})
			}
		})
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
)

// TestSeparateBinaries runs the mesh as nine processes wired only by the variables
// docker-compose.yml sets, makes a run through the CLI, and stops each process with SIGTERM,
// which must drain and exit 0.
func TestSeparateBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	isolate(t)
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{meshproc.Orchestrator}})
	orchestrator := m.Replica(t, meshproc.Orchestrator)

	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"run", "--addr", orchestrator.Addr(), "What is 6 times 7?"}, &stdout, &stderr); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "42") || !strings.Contains(stderr.String(), "← calculator: 42") {
		t.Errorf("run output:\n%s%s", stdout.String(), stderr.String())
	}

	services := []*meshproc.Service{orchestrator}
	for _, s := range meshproc.Stages {
		services = append(services, m.Stage(t, s.Name))
	}
	for _, s := range services {
		if err := s.Stop(t); err != nil {
			t.Errorf("%s did not exit cleanly on SIGTERM: %v", s.Name(), err)
		}
	}
}

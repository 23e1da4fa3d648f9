package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
)

// TestDevExitsWhenItsMemoryStageFails runs `agentmesh dev` (the process) with its memory stage
// on a PostgreSQL database whose memories break the unique index the stage builds at start
// (two memories of a user with one document key): the stage fails for good, and dev logs why
// (not the duplicated user id and document key: user data), stops the mesh and exits 3, as the
// memory binary does. It served on, its memory stage serving nothing, for ever.
func TestDevExitsWhenItsMemoryStageFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh dev as a separate process")
	}
	isolate(t)
	dsn := storetest.PostgresWithDuplicates(t)
	dir := t.TempDir()
	var yaml strings.Builder
	fmt.Fprintf(&yaml, "memory:\n  store: postgres\n  dsn: %q\nservices:\n", dsn)
	for _, n := range []string{"orchestrator", "intent", "planning", "context", "generation",
		"action", "observation", "memory", "recovery"} {
		fmt.Fprintf(&yaml, "  %s: %q\n", n, anyPort)
	}
	cfg := filepath.Join(dir, "agentmesh.yaml")
	if err := os.WriteFile(cfg, []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(t.Context(), meshproc.BuildCLI(t), "dev", "--config", cfg,
		"--data", filepath.Join(dir, "data"))
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "OTEL_SDK_DISABLED=true"}
	var logs meshproc.LogBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("agentmesh dev still runs a minute after its memory stage failed:\n%s", logs.String())
	}
	code := 0
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if code != exitcode.Unavailable {
		t.Errorf("agentmesh dev exited %d, want %d:\n%s", code, exitcode.Unavailable, out)
	}
	for _, want := range []string{"the mesh is up", "level=ERROR", "failed: stopping the mesh",
		"memories_document", "one memory of a user per document chunk"} {
		if !strings.Contains(out, want) {
			t.Errorf("dev's log does not say %q:\n%s", want, out)
		}
	}
	for _, value := range []string{storetest.DuplicatedUser, storetest.DuplicatedKey} {
		if strings.Contains(out, value) {
			t.Errorf("dev's log shows %q, user data of the duplicated rows:\n%s", value, out)
		}
	}
}

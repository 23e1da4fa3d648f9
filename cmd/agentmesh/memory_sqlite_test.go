package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
)

// TestSQLiteMemoryIsItsOwnersAlone: the memory binary on SQLite creates its database, and the
// files SQLite keeps beside it, readable by its own user alone (0600), whatever the umask: they
// hold every user's memories and saved runs. They were created 0644 under the usual umask 022,
// so any account of the host read them (the README's example keeps the database in the
// project's directory).
func TestSQLiteMemoryIsItsOwnersAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the memory stage as a separate process")
	}
	isolate(t)
	old := syscall.Umask(0o022) // the usual one, inherited by the process started below
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	db := filepath.Join(dir, "memory.db")
	cfg := filepath.Join(dir, "agentmesh.yaml")
	yaml := fmt.Appendf(nil, "memory:\n  store: sqlite\n  path: %q\n", db)
	if err := os.WriteFile(cfg, yaml, 0o600); err != nil {
		t.Fatal(err)
	}
	meshproc.External(t, "memory", filepath.Join(meshproc.Build(t), "memory"), nil,
		[]string{"AGENTMESH_CONFIG=" + cfg, "OTEL_SDK_DISABLED=true"}, nil)
	for _, name := range []string{db, db + "-wal", db + "-shm"} {
		info, err := os.Stat(name)
		if err != nil {
			t.Errorf("the memory stage serves without %s: %v", filepath.Base(name), err)
			continue
		}
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %#o, want 0600", filepath.Base(name), perm)
		}
	}
}

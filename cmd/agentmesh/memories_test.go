package main

import (
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
)

// TestMemoriesFromTheCLI (issue 13.5): what `agentmesh run` was asked to remember shows in
// `agentmesh memories` once the run is learned from, and `agentmesh memories delete` forgets it.
func TestMemoriesFromTheCLI(t *testing.T) {
	isolate(t)
	m, err := mesh.Start(t.Context(), mesh.Options{Ephemeral: true, StoreDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	addr := m.Addr(mesh.Orchestrator)

	out, _ := runCLI(t, 0, "memories", "--addr", addr)
	if strings.TrimSpace(out) != "no memories" {
		t.Errorf("memories before any run: %q", out)
	}
	runCLI(t, 0, "run", "--addr", addr, "Remember that my favourite colour is green.")
	line := regexp.MustCompile(`(?m)^(\S+)  0\.90  .*  The user's favourite colour is green\.  \(learned from run \S+ by the rules\)$`)
	deadline := time.Now().Add(10 * time.Second)
	var id string
	for id == "" {
		out, _ = runCLI(t, 0, "memories", "list", "--addr", addr)
		if m := line.FindStringSubmatch(out); m != nil {
			id = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("memories never listed the learned fact:\n%s", out)
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}

	if out, _ := runCLI(t, 0, "memories", "--addr", addr, "delete", id); !strings.Contains(out, "deleted memory "+id) {
		t.Errorf("memories delete: %q", out)
	}
	if out, _ := runCLI(t, 0, "memories", "--addr", addr); strings.TrimSpace(out) != "no memories" {
		t.Errorf("memories after the deletion: %q", out)
	}
	if _, errOut := runCLI(t, 4, "memories", "--addr", addr, "delete", id); !strings.Contains(errOut, "not found") {
		t.Errorf("deleting it again: %q", errOut)
	}
	if _, errOut := runCLI(t, 4, "memories", "--addr", addr, "forget", id); !strings.Contains(errOut, "list, or delete and a memory id") {
		t.Errorf("memories forget: %q", errOut)
	}
}

// TestMemoriesListsOneMemoryALine: `agentmesh memories` prints one line a memory, whatever its
// text holds. A memory of several lines (a personal memory stored through the memory stage)
// was printed as is: its lines read as memories of their own, without an id to delete them by.
func TestMemoriesListsOneMemoryALine(t *testing.T) {
	isolate(t)
	m := startMesh(t, config.Default())
	mem := memoryv1.NewMemoryServiceClient(dialService(t, m.Addr(mesh.Memory)))
	if _, err := mem.Store(t.Context(), &memoryv1.StoreRequest{UserId: "cli", Content: &typev1.Message{
		Role: typev1.Role_ROLE_USER, Content: "My addresses:\n  home: 1 Main Street\n  work: 2 High Street\n"}}); err != nil {
		t.Fatal(err)
	}
	out, _ := runCLI(t, 0, "memories", "--addr", m.Addr(mesh.Orchestrator))
	if !regexp.MustCompile(`^\S+  \d\.\d\d  .+  My addresses: home: 1 Main Street work: 2 High Street\n$`).MatchString(out) {
		t.Errorf("memories printed %q, want the memory on one line", out)
	}
}

// TestAnotherUsersMemoriesExit4: with authentication on, `agentmesh memories --user` naming
// another user than the caller's key is an invalid argument (seed 000: exit 4), as a key the
// mesh does not know is; the mesh's PERMISSION_DENIED exited 1, the code of a run that failed.
func TestAnotherUsersMemoriesExit4(t *testing.T) {
	isolate(t)
	aliceKey, aliceHash := auth.NewKey()
	cfg := config.Default()
	cfg.Auth.APIKeys = []config.APIKey{{Hash: aliceHash, Tenant: "acme", User: "alice"}}
	addr := startMesh(t, cfg).Addr(mesh.Orchestrator)
	t.Setenv("AGENTMESH_API_KEY", aliceKey)
	runCLI(t, 0, "memories", "--addr", addr)
	for _, args := range [][]string{
		{"memories", "--addr", addr, "--user", "acme/bob"},
		{"memories", "--addr", addr, "--user", "acme/bob", "delete", "m-1"},
	} {
		if _, errOut := runCLI(t, 4, args...); !strings.Contains(errOut, "acme/bob") {
			t.Errorf("agentmesh %s: the error does not name the user:\n%s", strings.Join(args, " "), errOut)
		}
	}
}

// TestMemoriesWritesNoControlSequences: a memory's text (a fact a model learned, a document
// ingested) is shown as text: its ANSI escapes were written raw to the terminal, where they
// could clear the screen or rewrite the lines listed before it.
func TestMemoriesWritesNoControlSequences(t *testing.T) {
	isolate(t)
	m := startMesh(t, config.Default())
	mem := memoryv1.NewMemoryServiceClient(dialService(t, m.Addr(mesh.Memory)))
	if _, err := mem.Store(t.Context(), &memoryv1.StoreRequest{UserId: "cli", Content: &typev1.Message{
		Role: typev1.Role_ROLE_USER, Content: "My colour is \x1b[2J\x1b]0;pwned\x07green\rred"}}); err != nil {
		t.Fatal(err)
	}
	out, _ := runCLI(t, 0, "memories", "--addr", m.Addr(mesh.Orchestrator))
	if i := strings.IndexFunc(out, isTerminalControl); i >= 0 {
		t.Errorf("memories writes a control character at byte %d to the terminal:\n%q", i, out)
	}
	if !strings.Contains(out, "My colour is ^[[2J^[]0;pwned^Ggreen red\n") {
		t.Errorf("memories printed %q, want the memory's escapes shown visibly", out)
	}
}

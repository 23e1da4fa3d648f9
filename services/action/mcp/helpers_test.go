package mcp_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/services/action/mcp"
)

func itoa(n int) string { return strconv.Itoa(n) }

// childExists reports whether a process whose environment holds name=value still exists
// (reaped processes vanish from /proc).
func childExists(name, value string) bool {
	want := []byte(name + "=" + value)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(environ, []byte{0}) {
			if bytes.Equal(kv, want) {
				return true
			}
		}
	}
	return false
}

// killMarked kills every process whose environment holds name=value.
func killMarked(name, value string) {
	want := []byte(name + "=" + value)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(environ, []byte{0}) {
			if bytes.Equal(kv, want) {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
	}
}

// failedOverTheLimit fails the test unless err, of a call of hugeTool on server "bulky" of m,
// names the server, the tool and MaxFrameBytes, and the server's next call answers.
func failedOverTheLimit(t *testing.T, m *mcp.Manager, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("a result over the frame limit was taken")
	}
	for _, part := range []string{`MCP server "bulky"`, "tool " + hugeTool, itoa(mcp.MaxFrameBytes)} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the error %q does not name %q", err, part)
		}
	}
	if got, err := call(t, m, "bulky", "small", nil); err != nil || got != "small" {
		t.Fatalf("the next call: %q, %v; want the session to go on", got, err)
	}
}

package mcp_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if file := os.Getenv(toolsFileVar); file != "" {
		os.Exit(serveToolsOf(file)) // started by a test as a stdio MCP server
	}
	goleak.VerifyTestMain(m)
}

// markerVar is set in each stdio server's environment so a test can find its process.
const markerVar = "AGENTMESH_TEST_MARKER"

// quiet are options for tests: no logs, fast restarts and a short shutdown grace.
func quiet() mcp.Options {
	return mcp.Options{
		Logger:         slog.New(slog.DiscardHandler),
		RestartBackoff: 10 * time.Millisecond,
		TerminateGrace: 200 * time.Millisecond,
	}
}

// everything describes server-everything over stdio, marked with the test's name.
func everything(t *testing.T) mcp.Server {
	return mcp.Server{
		Name:    "everything",
		Command: "node",
		Args:    []string{mcptest.Bin(t, mcptest.Everything), "stdio"},
		Env:     map[string]string{markerVar: t.Name()},
	}
}

// start starts the servers and closes them when the test ends.
func start(t *testing.T, opts mcp.Options, servers ...mcp.Server) *mcp.Manager {
	t.Helper()
	mcptest.Node(t)
	m, err := mcp.Start(t.Context(), servers, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { closeManager(t, m) })
	return m
}

// closeManager closes m.
func closeManager(t *testing.T, m *mcp.Manager) {
	t.Helper()
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// call calls a tool with a bounded wait.
func call(t *testing.T, m *mcp.Manager, server, tool string, args map[string]any) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return m.Call(ctx, server, tool, args, mcp.Principals{})
}

// toolNamed returns the listed tool of server named name.
func toolNamed(t *testing.T, m *mcp.Manager, server, name string) mcp.Tool {
	t.Helper()
	for _, tool := range m.Tools() {
		if tool.Server == server && tool.Name == name {
			return tool
		}
	}
	t.Fatalf("server %s lists no tool %q", server, name)
	return mcp.Tool{}
}

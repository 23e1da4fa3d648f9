package action_test

import (
	"log/slog"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
)

func TestKilledMCPServerIsRestarted(t *testing.T) {
	mcptest.Node(t)
	const marker = "AGENTMESH_TEST_MARKER"
	m, err := mcp.Start(t.Context(), []mcp.Server{{
		Name:    "everything",
		Command: "node",
		Args:    []string{mcptest.Bin(t, mcptest.Everything)},
		Env:     map[string]string{marker: t.Name()},
	}}, mcp.Options{Logger: slog.New(slog.DiscardHandler), RestartBackoff: 10 * time.Millisecond, TerminateGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	tools, err := action.MCPTools(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := serve(t, action.Options{Tools: tools})
	echo := func() bool {
		resp, err := client.Execute(t.Context(), request(t, "everything__echo", map[string]any{"message": "ping"}))
		return err == nil && resp.GetStatus() == typev1.ToolStatus_TOOL_STATUS_SUCCESS && resp.GetResult() == "Echo: ping"
	}
	if !echo() {
		t.Fatal("echo failed before the kill")
	}
	pid := mcptest.ChildPID(t, marker, t.Name())
	mcptest.Kill(t, pid)
	mcptest.Poll(t, 20*time.Second, "echo to succeed on the restarted server", func() bool {
		return mcptest.ChildPID(t, marker, t.Name()) != pid && echo()
	})
}

package action_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
)

// noisyStdout is a Node preload that makes server-everything print what many real servers
// print on their stdout besides their messages: a banner when it starts, and before each
// message a line of text and a JSON log line.
const noisyStdout = `
console.log("everything server v1 starting");
const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => {
	write("debug: answering\n");
	write('{"level":30,"msg":"answering"}\n');
	return write(chunk, ...rest);
};
`

// TestLinesThatAreNoMCPMessageOnAStdioServersStdoutAreSkipped: a stdio server's stdout is
// for its JSON-RPC messages, but servers print banners and log lines there too; the MCP
// reference clients (TypeScript, Python) skip what is no message. The action stage's SDK
// ended the session on the first such line: the server never started (the action stage did
// not), or, printing one later, failed every call in flight and was restarted again and again.
// Such lines are skipped, and the server's calls answer.
func TestLinesThatAreNoMCPMessageOnAStdioServersStdoutAreSkipped(t *testing.T) {
	mcptest.Node(t)
	preload := filepath.Join(t.TempDir(), "noisy.js")
	if err := os.WriteFile(preload, []byte(noisyStdout), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := mcp.Start(t.Context(), []mcp.Server{{
		Name:    "everything",
		Command: "node",
		Args:    []string{"--require", preload, mcptest.Bin(t, mcptest.Everything)},
		Env:     map[string]string{childMarker: t.Name()},
	}}, mcp.Options{Logger: slog.New(slog.DiscardHandler), RestartBackoff: 10 * time.Millisecond,
		TerminateGrace: 200 * time.Millisecond})
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
	pid := mcptest.ChildPID(t, childMarker, t.Name())
	for range 3 {
		req := request(t, "everything__echo", map[string]any{"message": "ping"})
		resp, err := client.Execute(t.Context(), req)
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != "Echo: ping" {
			t.Fatalf("echo: %v %q %q", resp.GetStatus(), resp.GetResult(), resp.GetError())
		}
	}
	if now := mcptest.ChildPID(t, childMarker, t.Name()); now != pid {
		t.Errorf("the server was restarted (pid %d, then %d)", pid, now)
	}
}

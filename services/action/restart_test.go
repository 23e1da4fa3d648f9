package action_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
)

func TestKilledMCPServerIsRestarted(t *testing.T) {
	client := serveEverything(t)
	echo := func() bool {
		resp, err := client.Execute(t.Context(), request(t, "everything__echo", map[string]any{"message": "ping"}))
		return err == nil && resp.GetStatus() == typev1.ToolStatus_TOOL_STATUS_SUCCESS && resp.GetResult() == "Echo: ping"
	}
	if !echo() {
		t.Fatal("echo failed before the kill")
	}
	pid := mcptest.ChildPID(t, childMarker, t.Name())
	mcptest.Kill(t, pid)
	mcptest.Poll(t, 20*time.Second, "echo to succeed on the restarted server", func() bool {
		return mcptest.ChildPID(t, childMarker, t.Name()) != pid && echo()
	})
}

// TestAStdioServerThatDiesDuringACallSaysSo: a stdio server that exits while it runs a call
// ends its stdout, and the call failed with the SDK's bare "calling "tools/call": EOF", which
// tells neither the model nor the operator that the server went away. It fails as one whose
// connection was lost, once (the server may have run it), and the restarted server answers.
func TestAStdioServerThatDiesDuringACallSaysSo(t *testing.T) {
	client := serveEverything(t)
	pid := mcptest.ChildPID(t, childMarker, t.Name())
	read := readBytes(t, pid)

	type result struct {
		resp *actionv1.ExecuteResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req := request(t, "everything__trigger-long-running-operation", map[string]any{"duration": 30, "steps": 1})
		resp, err := client.Execute(t.Context(), req)
		done <- result{resp, err}
	}()
	mcptest.Poll(t, 10*time.Second, "the server to read the call", func() bool { return readBytes(t, pid) > read })
	mcptest.Kill(t, pid)
	r := <-done
	if r.err != nil {
		t.Fatalf("Execute: %v", r.err)
	}
	if r.resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || r.resp.GetAttempts() != 1 {
		t.Errorf("status %v after %d attempts, want an error after 1 (it may have run)", r.resp.GetStatus(), r.resp.GetAttempts())
	}
	if want := `MCP server "everything": the connection was lost during the call`; !strings.Contains(r.resp.GetError(), want) {
		t.Errorf("error %q does not say %q", r.resp.GetError(), want)
	}
	mcptest.Poll(t, 20*time.Second, "echo to succeed on the restarted server", func() bool {
		resp, err := client.Execute(t.Context(), request(t, "everything__echo", map[string]any{"message": "ping"}))
		return err == nil && resp.GetResult() == "Echo: ping"
	})
}

// childMarker is the environment variable that marks a stdio server a test starts with the
// test's name, so that the test finds its process (mcptest.ChildPID).
const childMarker = "AGENTMESH_TEST_MARKER"

// serveEverything serves an action stage whose tools are those of a stdio server-everything,
// started with childMarker set to the test's name and restarted soon after it dies.
func serveEverything(t *testing.T) actionv1.ActionServiceClient {
	t.Helper()
	mcptest.Node(t)
	m, err := mcp.Start(t.Context(), []mcp.Server{{
		Name:    "everything",
		Command: "node",
		Args:    []string{mcptest.Bin(t, mcptest.Everything)},
		Env:     map[string]string{childMarker: t.Name()},
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
	return serve(t, action.Options{Tools: tools})
}

// readBytes returns how many bytes process pid has read (rchar of /proc/<pid>/io).
func readBytes(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "io"))
	if err != nil {
		t.Fatalf("reading the I/O counters of process %d: %v", pid, err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "rchar:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("rchar of process %d: %v", pid, err)
			}
			return n
		}
	}
	t.Fatalf("process %d: no rchar in /proc/%d/io", pid, pid)
	return 0
}

package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
)

// TestAMessageOverTheFrameLimitFailsOnlyItsCall: a stdio server's answer over the limit of one
// message (mcp.MaxFrameBytes) fails that call with an error naming the tool, the server and the
// limit, and the session goes on: the same process answers the next call. The SDK's reader
// gave up on the whole connection, so every call in flight failed, the server was restarted
// (losing its state), and the call's error said only that the connection was lost.
func TestAMessageOverTheFrameLimitFailsOnlyItsCall(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tools")
	if err := os.WriteFile(file, []byte(hugeTool+"\nsmall\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := start(t, quiet(), mcp.Server{
		Name:    "bulky",
		Command: self,
		Env:     map[string]string{toolsFileVar: file, markerVar: t.Name()},
	})
	pid := mcptest.ChildPID(t, markerVar, t.Name())
	// The server writes 17 MiB, and the race detector slows that down: a longer wait than call's.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err = m.Call(ctx, "bulky", hugeTool, nil, mcp.Principals{})
	failedOverTheLimit(t, m, err)
	if now := mcptest.ChildPID(t, markerVar, t.Name()); now != pid {
		t.Errorf("the server was restarted (pid %d, then %d); want the session kept", pid, now)
	}
}

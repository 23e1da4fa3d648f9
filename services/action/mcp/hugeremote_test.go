package mcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestARemoteMessageOverTheFrameLimitFailsOnlyItsCall: a remote server's answer over the limit
// of one message (mcp.MaxFrameBytes), as an SSE event or as a JSON body, fails that call with an
// error naming the tool, the server and the limit, and the session goes on: the next call is
// answered. The SDK ended the whole connection on an SSE event over 16 MiB (every call in
// flight failed and the server was reconnected), and read a JSON body of any size.
func TestARemoteMessageOverTheFrameLimitFailsOnlyItsCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		json bool
	}{{"sse", false}, {"json", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := sdk.NewServer(&sdk.Implementation{Name: "bulky", Version: "1.0.0"}, nil)
			addTool(srv, hugeTool)
			addTool(srv, "small")
			url, _ := mcptest.ServeHTTPWith(t, srv, &sdk.StreamableHTTPOptions{JSONResponse: tc.json})
			m := start(t, quiet(), mcp.Server{Name: "bulky", URL: url})
			sessions := countSessions(srv)
			// 17 MiB, slower under the race detector: a longer wait than call's.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			_, err := m.Call(ctx, "bulky", hugeTool, nil, mcp.Principals{})
			failedOverTheLimit(t, m, err)
			if now := countSessions(srv); now != sessions {
				t.Errorf("the server had %d sessions, then %d; want the session kept", sessions, now)
			}
		})
	}
}

// countSessions returns the number of srv's sessions.
func countSessions(srv *sdk.Server) int {
	n := 0
	for range srv.Sessions() {
		n++
	}
	return n
}

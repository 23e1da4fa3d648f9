package mcp_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
)

// echoHandler serves, over streamable HTTP, an MCP server "notes" (srv, whose sessions a test
// closes) with one tool, echo, that answers its text after prefix.
func echoHandler(prefix string) (handler http.Handler, srv *sdk.Server) {
	srv = sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	type args struct {
		Text string `json:"text"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes."}, func(_ context.Context, _ *sdk.CallToolRequest, a args) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: prefix + a.Text}}}, nil, nil
	})
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil), srv
}

// echoServer serves on l an MCP server over streamable HTTP with one tool, echo, answering its
// text after prefix, until the test ends or stop ends its sessions and stops it, so that its
// port refuses connections.
func echoServer(t *testing.T, l net.Listener, prefix string) (stop func()) {
	t.Helper()
	handler, srv := echoHandler(prefix)
	hs := &httptest.Server{Listener: l, Config: &http.Server{Handler: handler}}
	hs.Start()
	stop = sync.OnceFunc(func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		hs.CloseClientConnections()
		hs.Close()
	})
	t.Cleanup(stop)
	return stop
}

// TestARemoteServerThatIsGoneIsUnavailable: a remote server that refuses connections (it is
// down, or being redeployed) and one that restarted and no longer knows the session ran
// nothing, so a call to it fails wrapping ErrUnavailable, which the action stage retries and
// does not count as an attempt that reached the server, as it does for a stdio server being
// restarted. Such calls failed as if the server had run and failed the tool.
func TestARemoteServerThatIsGoneIsUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	stop := echoServer(t, l, "")
	m := start(t, quiet(), mcp.Server{Name: "notes", URL: "http://" + addr + "/mcp"})
	if got, err := call(t, m, "notes", "echo", map[string]any{"text": "hi"}); err != nil || got != "hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}

	stop()
	// The first call may still find the connection the server closed; the next ones find the
	// port closed.
	mcptest.Poll(t, 10*time.Second, "a call refused by the closed port", func() bool {
		_, err = call(t, m, "notes", "echo", map[string]any{"text": "hi"})
		var op *net.OpError
		return errors.As(err, &op) && op.Op == "dial"
	})
	if !errors.Is(err, mcp.ErrUnavailable) {
		t.Errorf("a call to a server that refuses connections: %v, want an error wrapping ErrUnavailable", err)
	}

	// The server comes back without the session, which it answers 404: unavailability too,
	// until the session is made again.
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, l, "again: ")
	mcptest.Poll(t, 20*time.Second, "a call answered by the restarted server", func() bool {
		got, err := call(t, m, "notes", "echo", map[string]any{"text": "hi"})
		if errors.Is(err, sdk.ErrSessionMissing) && !errors.Is(err, mcp.ErrUnavailable) {
			t.Fatalf("a call to a server that restarted: %v, want an error wrapping ErrUnavailable", err)
		}
		return err == nil && got == "again: hi"
	})
}

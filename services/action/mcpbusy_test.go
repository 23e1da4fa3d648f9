package action_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestARemoteMCPServerThatIsBusyIsTriedAgain: a remote MCP server's gateway that answers a
// call 503 (the server is being redeployed) or 429 (too many requests) says the server did
// not take it, as for a REST tool, whose call is retried. The call failed as the tool's own
// failure ("rejected by transport: sending "tools/call": Service Unavailable"), never tried
// again. It is retried, no sooner than a Retry-After asks, and the attempt the server never
// took is not counted.
func TestARemoteMCPServerThatIsBusyIsTriedAgain(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	type echoArgs struct {
		Text string `json:"text"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echoes.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, a echoArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: a.Text}}}, nil, nil
		})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	var (
		busy  atomic.Int32 // the status the next call is answered, 0 for none
		mu    sync.Mutex
		calls []time.Time // when each tools/call came
	)
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !strings.Contains(string(body), `"tools/call"`) {
			handler.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		if code := busy.Load(); code != 0 && busy.CompareAndSwap(code, 0) {
			if code == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "1")
			}
			http.Error(w, "<html>try again later</html>", int(code))
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
		gateway.CloseClientConnections()
		gateway.Close()
	})
	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"notes": {URL: gateway.URL}}
	client := serveConfig(t, cfg)
	for _, code := range []int32{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		busy.Store(code)
		resp, err := client.Execute(t.Context(), request(t, "notes__echo", map[string]any{"text": "hi"}))
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != "hi" ||
			resp.GetAttempts() != 1 {
			t.Errorf("after a %d: %v %q %q after %d attempts; want hi after 1", code,
				resp.GetStatus(), resp.GetResult(), resp.GetError(), resp.GetAttempts())
		}
		if busy.Load() != 0 {
			t.Errorf("the gateway did not answer a call %d", code)
		}
	}
	// The 429 asked for a second (Retry-After: 1), which the retry waited; it came after the
	// stage's own backoff, a tenth of that.
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 4 {
		t.Fatalf("the gateway got %d calls, want 4", len(calls))
	}
	if gap := calls[3].Sub(calls[2]); gap < time.Second {
		t.Errorf("retried %v after the 429, want at least the 1 s Retry-After asked for", gap)
	}
}

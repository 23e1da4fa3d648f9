package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestDevExitsFiveOnAToolSchemaThatDoesNotCompile: an MCP server offering a tool whose
// inputSchema does not compile stops `agentmesh dev` before it serves with exit 5, seed 000's
// code of a schema validation failure ("e.g., tool schema validation"), naming the tool; it
// exited 4, the code of a configuration error.
func TestDevExitsFiveOnAToolSchemaThatDoesNotCompile(t *testing.T) {
	isolate(t)
	srv := sdk.NewServer(&sdk.Implementation{Name: "broken", Version: "1.0.0"}, nil)
	bad := map[string]any{"type": "object",
		"properties": map[string]any{"q": map[string]any{"type": 7}}}
	srv.AddTool(&sdk.Tool{Name: "lookup", Description: "Looks up.", InputSchema: bad},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	mcpServer := httptest.NewServer(handler)
	t.Cleanup(mcpServer.Close)
	yaml := fmt.Sprintf("mcp_servers: {broken: {url: %q}}\nservices:\n", mcpServer.URL)
	for _, n := range []string{"orchestrator", "intent", "planning", "context", "generation",
		"action", "observation", "memory", "recovery"} {
		yaml += fmt.Sprintf("  %s: %q\n", n, anyPort)
	}
	if err := os.WriteFile("agentmesh.yaml", []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"dev", "--run", "What is 6 times 7?"}, &stdout, &stderr)
	if code != 5 {
		t.Fatalf("exit %d, want 5\nstderr: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), `tool "broken__lookup": schema`) {
		t.Errorf("stderr does not name the tool and its schema:\n%s", stderr.String())
	}
}

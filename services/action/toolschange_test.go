package action_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
)

// TestListToolsFollowsAnMCPServersChanges: an MCP server that adds and removes tools while the
// stage runs says so (notifications/tools/list_changed). The stage listed its tools once, so
// ListTools never offered the added tool and kept offering the removed one. Now ListTools
// answers the new list, under a new version (the orchestrator's cache asks with the old one),
// the added tool runs, and the removed one is TOOL_NOT_FOUND.
func TestListToolsFollowsAnMCPServersChanges(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "changing", Version: "1"}, nil)
	answers(srv, "old_lookup")
	url, _ := mcptest.ServeHTTP(t, srv)
	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"changing": {URL: url}}
	client := serveEdited(t, cfg, func(*action.Options) {})

	first, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasTool(first, "changing__old_lookup") || hasTool(first, "changing__new_lookup") {
		t.Fatalf("tools at start: %v", toolNamesOf(first))
	}

	answers(srv, "new_lookup")
	srv.RemoveTools("old_lookup")
	var now *actionv1.ListToolsResponse
	mcptest.Poll(t, 10*time.Second, "ListTools to offer the new tool and not the old", func() bool {
		req := &actionv1.ListToolsRequest{KnownVersion: first.GetVersion()}
		now, err = client.ListTools(t.Context(), req)
		return err == nil && hasTool(now, "changing__new_lookup") && !hasTool(now, "changing__old_lookup")
	})
	if now.GetVersion() == first.GetVersion() || now.GetUnchanged() {
		t.Errorf("the list changed, and its version %q did not", now.GetVersion())
	}
	resp, err := client.Execute(t.Context(), request(t, "changing__new_lookup", nil))
	if err != nil || resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS ||
		resp.GetResult() != "new_lookup" {
		t.Errorf("the added tool: %v, %v", resp, err)
	}
	_, err = client.Execute(t.Context(), request(t, "changing__old_lookup", nil))
	grpctest.WantStageError(t, err, codes.NotFound,
		typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND, `unknown tool "changing__old_lookup"`)
}

// TestACallRacingAToolsRemovalSaysSo: a call admitted with a tool its MCP server removed
// meanwhile (here the tools are given as MCPTools made them, and never listed again) failed
// with the server's own error, counted as an attempt that reached it. It fails naming the tool
// and the server, and counts no attempt: nothing was sent.
func TestACallRacingAToolsRemovalSaysSo(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "changing", Version: "1"}, nil)
	answers(srv, "old_lookup")
	url, _ := mcptest.ServeHTTP(t, srv)
	m, err := mcp.Start(t.Context(), []mcp.Server{{Name: "changing", URL: url}},
		mcp.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
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

	srv.RemoveTools("old_lookup")
	mcptest.Poll(t, 10*time.Second, "the manager to see the tool removed", func() bool {
		return len(m.Tools()) == 0
	})
	resp, err := client.Execute(t.Context(), request(t, "changing__old_lookup", nil))
	if err != nil {
		t.Fatal(err)
	}
	want := `MCP server "changing" has no tool "old_lookup"`
	if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || !strings.Contains(resp.GetError(), want) ||
		resp.GetAttempts() != 0 {
		t.Errorf("status %v, error %q after %d attempts; want an error saying %q after none",
			resp.GetStatus(), resp.GetError(), resp.GetAttempts(), want)
	}
}

// answers adds to srv a tool named name that answers its name.
func answers(srv *sdk.Server, name string) {
	srv.AddTool(&sdk.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name}}}, nil
		})
}

// hasTool reports whether resp lists the tool name.
func hasTool(resp *actionv1.ListToolsResponse, name string) bool {
	for _, t := range resp.GetTools() {
		if t.GetName() == name {
			return true
		}
	}
	return false
}

// toolNamesOf returns the names resp lists.
func toolNamesOf(resp *actionv1.ListToolsResponse) []string {
	var names []string
	for _, t := range resp.GetTools() {
		names = append(names, t.GetName())
	}
	return names
}

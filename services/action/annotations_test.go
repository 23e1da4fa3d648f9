package action_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
)

// TestAnMCPToolThatMayDestroyNeedsApproval: an MCP tool whose annotations do not call it
// read-only may destroy unless they say otherwise (the specification's destructiveHint
// defaults to true), so it needs approval; it needed none unless destructiveHint was set, or
// its name held a word such as "delete". A tool said to be additive only, or read-only,
// needs none; one without annotations is judged by its name.
func TestAnMCPToolThatMayDestroyNeedsApproval(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "records", Version: "1.0.0"}, nil)
	type args struct {
		ID string `json:"id"`
	}
	handle := func(context.Context, *mcp.CallToolRequest, args) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	}
	no := false
	mcp.AddTool(srv, &mcp.Tool{Name: "archive_record", Description: "Archives a record.", Annotations: &mcp.ToolAnnotations{Title: "Archive"}}, handle)
	mcp.AddTool(srv, &mcp.Tool{Name: "tag_record", Description: "Tags a record.", Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}}, handle)
	mcp.AddTool(srv, &mcp.Tool{Name: "show_record", Description: "Shows a record.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, handle)
	mcp.AddTool(srv, &mcp.Tool{Name: "count_records", Description: "Counts the records."}, handle)
	mcp.AddTool(srv, &mcp.Tool{Name: "delete_record", Description: "Deletes a record."}, handle)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)

	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"records": {URL: hs.URL}}
	resp, err := serveConfig(t, cfg).ListTools(t.Context(), &actionv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tool := range resp.GetTools() {
		got[tool.GetName()] = tool.GetRequiresApproval()
	}
	for name, want := range map[string]bool{
		"records__archive_record": true,  // not read-only, destructive by default
		"records__tag_record":     false, // says it only adds
		"records__show_record":    false, // read-only
		"records__count_records":  false, // no annotations, nothing risky in its name
		"records__delete_record":  true,  // no annotations, "delete"
	} {
		if approval, listed := got[name]; !listed || approval != want {
			t.Errorf("%s: listed %v, requires approval %v; want %v", name, listed, approval, want)
		}
	}
}

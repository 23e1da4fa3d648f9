package action_test

import (
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// providerName is the form of the function names OpenAI and Anthropic take; a request offering
// a tool named otherwise is refused.
var providerName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// namedToolsServer serves, over streamable HTTP, an MCP server whose tools, named names, each
// answer their own name.
func namedToolsServer(t *testing.T, names ...string) string {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "named", Version: "1.0.0"}, nil)
	for _, name := range names {
		sdk.AddTool(srv, &sdk.Tool{Name: name, Description: "Answers its name.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *sdk.CallToolRequest, map[string]any) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: name}}}, nil, nil
			})
	}
	mcpURL, _ := mcptest.ServeHTTP(t, srv)
	return mcpURL
}

// TestMCPToolNamesAreNamesProvidersTake: an MCP tool whose name in the mesh, "<server>__<tool>",
// has characters model providers refuse in a function name (the MCP specification allows dots,
// "notes.search") or is longer than they take is listed under a name they take, and runs the
// server's tool; an approval binding may still name it as the server does. Such a tool was
// listed as it was, and every run that offered it failed at OpenAI or Anthropic.
func TestMCPToolNamesAreNamesProvidersTake(t *testing.T) {
	long := "search_the_notes_of_the_current_workspace_by_their_title_and_their_body"
	url := namedToolsServer(t, "notes.search", long, "notes.delete")
	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"notes": {URL: url, RequiresApproval: []string{"notes.delete"}}}
	client := serveConfig(t, cfg)

	resp, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]*typev1.Tool{}
	for _, tool := range resp.GetTools() {
		if !providerName.MatchString(tool.GetName()) {
			t.Errorf("tool %q is listed under a name model providers refuse", tool.GetName())
		}
		names[tool.GetName()] = tool
	}
	if names["notes__notes_search"] == nil || names["notes__notes_delete"] == nil {
		t.Fatalf("tools %v, want notes.search and notes.delete as notes__notes_search and notes__notes_delete", slices.Sorted(maps.Keys(names)))
	}
	if !names["notes__notes_delete"].GetRequiresApproval() {
		t.Error("notes.delete, bound to approval by its name on its server, does not require approval")
	}
	var longName string
	for name := range names {
		if strings.HasPrefix(name, "notes__search_the_notes") {
			longName = name
		}
	}
	if len(longName) != 64 {
		t.Fatalf("the long tool is listed as %q, want a name of 64 characters", longName)
	}
	for name, want := range map[string]string{"notes__notes_search": "notes.search", longName: long} {
		resp, err := client.Execute(t.Context(), request(t, name, map[string]any{}))
		if err != nil || resp.GetResult() != want {
			t.Errorf("%s ran %v, %v; want the server's tool %s", name, resp, err, want)
		}
	}
}

// TestMCPToolNamesThatMeetAreRefused: two tools of a server whose names in the mesh would be
// the same stop the action stage, naming both.
func TestMCPToolNamesThatMeetAreRefused(t *testing.T) {
	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"notes": {URL: namedToolsServer(t, "notes.search", "notes_search")}}
	_, stop, err := action.OptionsFromConfig(t.Context(), cfg)
	if err == nil {
		_ = stop()
		t.Fatal("OptionsFromConfig succeeded")
	}
	if exitcode.Of(err) != exitcode.Invalid || !strings.Contains(err.Error(), `MCP server "notes": tools "notes.search" and "notes_search" would both be named "notes__notes_search"`) {
		t.Errorf("error %v (exit %d), want one naming both tools", err, exitcode.Of(err))
	}
}

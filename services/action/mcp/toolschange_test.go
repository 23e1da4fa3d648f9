package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolsFileVar names, in the environment of this test binary started as a stdio MCP server
// (TestMain), the file that lists its tools, one name a line.
const toolsFileVar = "AGENTMESH_TEST_MCP_TOOLS_FILE"

// serveToolsOf serves, over stdio, one tool for each name in file, each answering its name,
// and returns the process's exit code.
func serveToolsOf(file string) int {
	raw, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := sdk.NewServer(&sdk.Implementation{Name: "tools-of-file", Version: "1"}, nil)
	for name := range strings.FieldsSeq(string(raw)) {
		addTool(srv, name)
	}
	if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// hugeTool is the name of a tool serveToolsOf serves that answers a text of hugeBytes: its
// message is over the stdio transport's frame limit.
const (
	hugeTool  = "huge"
	hugeBytes = 17 << 20
)

// addTool adds a tool named name that answers its name (hugeTool: hugeBytes of it).
func addTool(srv *sdk.Server, name string) {
	text := name
	if name == hugeTool {
		text = strings.Repeat("h", hugeBytes)
	}
	srv.AddTool(&sdk.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil
		})
}

// toolNames returns the names of the tools m lists for server.
func toolNames(m *mcp.Manager, server string) []string {
	var names []string
	for _, t := range m.Tools() {
		if t.Server == server {
			names = append(names, t.Name)
		}
	}
	return names
}

// TestToolListChangesAreFollowed: a server that adds and removes tools while it runs says so
// (notifications/tools/list_changed); the manager read its list once, at start, so a tool it
// added was never offered and one it removed was still listed, its calls failing with the
// server's own "unknown tool" error. The manager lists the tools again on the notification, and
// a call to a tool the server no longer offers fails naming the tool and the server.
func TestToolListChangesAreFollowed(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "changing", Version: "1"}, nil)
	addTool(srv, "old")
	url, _ := mcptest.ServeHTTP(t, srv)
	m := start(t, quiet(), mcp.Server{Name: "changing", URL: url})
	if got := toolNames(m, "changing"); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("tools at start %v, want [old]", got)
	}
	gen := m.Generation()

	addTool(srv, "new")
	mcptest.Poll(t, 10*time.Second, "the added tool to be listed", func() bool {
		return slices.Equal(toolNames(m, "changing"), []string{"new", "old"})
	})
	if m.Generation() == gen {
		t.Error("the tools changed, and the generation did not")
	}
	if got, err := call(t, m, "changing", "new", nil); err != nil || got != "new" {
		t.Errorf("calling the added tool: %q, %v", got, err)
	}

	srv.RemoveTools("old")
	mcptest.Poll(t, 10*time.Second, "the removed tool to be unlisted", func() bool {
		return slices.Equal(toolNames(m, "changing"), []string{"new"})
	})
	_, err := call(t, m, "changing", "old", nil)
	want := `MCP server "changing" has no tool "old" (its tools: new)`
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, mcp.ErrNoTool) {
		t.Errorf("calling the removed tool: %v, want an error wrapping ErrNoTool saying %q", err, want)
	}
}

// TestARestartedServerIsListedAgain: a stdio server restarted after it died may be another
// version with other tools; the manager kept the list of the first start, so it offered the
// tool the new one lacks and never the one it added. It lists the tools of the restarted
// server before that takes calls; one restarted with the same tools leaves Generation as it was.
func TestARestartedServerIsListedAgain(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tools")
	if err := os.WriteFile(file, []byte("before\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := start(t, quiet(), mcp.Server{
		Name:    "versioned",
		Command: self,
		Env:     map[string]string{toolsFileVar: file, markerVar: t.Name()},
	})
	if got := toolNames(m, "versioned"); !slices.Equal(got, []string{"before"}) {
		t.Fatalf("tools at start %v, want [before]", got)
	}
	gen := m.Generation()
	pid := mcptest.ChildPID(t, markerVar, t.Name())
	mcptest.Kill(t, pid)
	mcptest.Poll(t, 20*time.Second, "the server restarted with the same tools to answer", func() bool {
		got, err := call(t, m, "versioned", "before", nil)
		return err == nil && got == "before" && mcptest.ChildPID(t, markerVar, t.Name()) != pid
	})
	if m.Generation() != gen {
		t.Errorf("the server came back with the same tools, and the generation moved")
	}

	if err := os.WriteFile(file, []byte("after\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mcptest.Kill(t, mcptest.ChildPID(t, markerVar, t.Name()))
	mcptest.Poll(t, 20*time.Second, "the restarted server's tools to be listed", func() bool {
		return slices.Equal(toolNames(m, "versioned"), []string{"after"})
	})
	if m.Generation() == gen {
		t.Error("the tools changed, and the generation did not")
	}
	if got, err := call(t, m, "versioned", "after", nil); err != nil || got != "after" {
		t.Errorf("calling the restarted server's tool: %q, %v", got, err)
	}
}

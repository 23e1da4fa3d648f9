package main

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/config"
)

// TestToolsListsOneToolALine: `agentmesh tools` prints one line a tool, its name, description
// and approval flag, whatever the description holds. A multi-line description (a YAML block,
// as MCP servers' often are) was printed as is: its lines read as tools of their own and the
// approval flag ended up apart from the tool's name, where grep could not find them together.
func TestToolsListsOneToolALine(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"forecast": {
		Description:      "Gets the weather forecast.\n\nArguments:\n  city: the city's name\n",
		URL:              "http://127.0.0.1:1/forecast",
		RequiresApproval: true,
	}}
	out, _ := runCLI(t, 0, "tools", "--addr", startMesh(t, cfg).Addr("orchestrator"))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 { // calculator, current_time, forecast, knowledge_search
		t.Errorf("%d lines, want one for each of the 4 tools:\n%s", len(lines), out)
	}
	want := "forecast             Gets the weather forecast. Arguments: city: the city's name [requires approval]"
	found := false
	for _, l := range lines {
		found = found || l == want
	}
	if !found {
		t.Errorf("no line %q:\n%s", want, out)
	}
}

// TestToolsWritesNoControlSequences: a tool's description, which an MCP server the mesh
// connects to writes, is shown as text: its ANSI escapes were written raw to the terminal.
func TestToolsWritesNoControlSequences(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"forecast": {
		Description: "Gets the \x1b]0;pwned\x07weather\x1b[2J forecast.",
		URL:         "http://127.0.0.1:1/forecast",
	}}
	out, _ := runCLI(t, 0, "tools", "--addr", startMesh(t, cfg).Addr("orchestrator"))
	if i := strings.IndexFunc(out, isTerminalControl); i >= 0 {
		t.Errorf("tools writes a control character at byte %d to the terminal:\n%q", i, out)
	}
	if !strings.Contains(out, "Gets the ^[]0;pwned^Gweather^[[2J forecast.") {
		t.Errorf("tools printed %q, want the description's escapes shown visibly", out)
	}
}

package action_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestListTools(t *testing.T) {
	flagged := newFakeTool("lookup_secret", returns(""))
	flagged.def.RequiresApproval = true
	tools := []action.Tool{
		newFakeTool("notes_lookup", returns("")),
		newFakeTool("delete_note", returns("")),
		newFakeTool("send-email", returns("")),
		newFakeTool("files_write", returns("")),
		newFakeTool("Run_Query", returns("")),
		newFakeTool("runner_status", returns("")),
		newFakeTool("archive", returns("")),
		newFakeTool("transfer_funds", returns("")),
		newFakeTool("drop_table", returns("")),
		newFakeTool("writeFile", returns("")),
		newFakeTool("createUser", returns("")),
		flagged,
	}
	memConn := serveMemory(t, &memoryServer{})
	client := serve(t, action.Options{
		Memory:          memoryv1.NewMemoryServiceClient(memConn),
		Tools:           tools,
		RequireApproval: []string{"archive"},
		NoApproval:      []string{"drop_table"},
	})
	resp, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	wantApproval := map[string]bool{
		"Run_Query": true, "archive": true, "calculator": false, "current_time": false,
		"delete_note": true, "drop_table": false, "files_write": true, "knowledge_search": false,
		"lookup_secret": true, "notes_lookup": false, "runner_status": false, "send-email": true,
		"transfer_funds": true, "writeFile": true,
		"createUser": false, // "create" needs MCP annotations saying the tool is not read-only
	}
	var names []string
	for _, tool := range resp.GetTools() {
		names = append(names, tool.GetName())
		want, ok := wantApproval[tool.GetName()]
		if !ok {
			t.Errorf("unexpected tool %q", tool.GetName())
			continue
		}
		if tool.GetRequiresApproval() != want {
			t.Errorf("%s: requires_approval = %v, want %v", tool.GetName(), tool.GetRequiresApproval(), want)
		}
		if tool.GetServer() != action.BuiltinServer || tool.GetDescription() == "" {
			t.Errorf("%s: server %q description %q", tool.GetName(), tool.GetServer(), tool.GetDescription())
		}
		if tool.GetInputSchema().GetFields()["type"].GetStringValue() != "object" {
			t.Errorf("%s: schema %v is not an object schema", tool.GetName(), tool.GetInputSchema())
		}
	}
	if len(names) != len(wantApproval) || !slices.IsSorted(names) {
		t.Errorf("tools %v: want all %d, sorted by name", names, len(wantApproval))
	}

	builtinSchemas := map[string]string{
		"calculator":       `{"additionalProperties":false,"properties":{"expression":{"type":"string"}},"required":["expression"],"type":"object"}`,
		"current_time":     `{"additionalProperties":false,"properties":{"timezone":{"type":"string"}},"type":"object"}`,
		"knowledge_search": `{"additionalProperties":false,"properties":{"limit":{"maximum":20,"minimum":1,"type":"integer"},"query":{"type":"string"}},"required":["query"],"type":"object"}`,
	}
	for _, tool := range resp.GetTools() {
		want, ok := builtinSchemas[tool.GetName()]
		if !ok {
			continue
		}
		if got := schemaShape(t, tool.GetInputSchema()); got != want {
			t.Errorf("%s schema shape:\n got %s\nwant %s", tool.GetName(), got, want)
		}
	}
}

// schemaShape renders a schema without descriptions and string limits, leaving type,
// properties, required, bounds and additionalProperties.
func schemaShape(t *testing.T, schema *structpb.Struct) string {
	t.Helper()
	s := proto.CloneOf(schema)
	for _, prop := range s.GetFields()["properties"].GetStructValue().GetFields() {
		for _, k := range []string{"description", "minLength", "maxLength", "pattern"} {
			delete(prop.GetStructValue().GetFields(), k)
		}
	}
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), " ", "")
}

func TestIdempotentTools(t *testing.T) {
	declared := newFakeTool("lookup_price", returns(""))
	declared.def.Idempotent = true
	tools := []action.Tool{declared, newFakeTool("set_flag", returns("")), newFakeTool("send_email", returns(""))}
	memConn := serveMemory(t, &memoryServer{})
	client := serve(t, action.Options{
		Memory:     memoryv1.NewMemoryServiceClient(memConn),
		Tools:      tools,
		Idempotent: []string{"set_flag"},
	})
	want := map[string]bool{
		"calculator": true, "current_time": true, "knowledge_search": true, // built-ins only read
		"lookup_price": true, // its definition says so
		"set_flag":     true, // configured
		"send_email":   false,
	}
	resp, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	for _, tool := range resp.GetTools() {
		if tool.GetIdempotent() != want[tool.GetName()] {
			t.Errorf("%s: idempotent = %v, want %v", tool.GetName(), tool.GetIdempotent(), want[tool.GetName()])
		}
	}

	t.Run("from configuration", func(t *testing.T) {
		cfg := config.Default()
		cfg.RestTools = map[string]config.RestTool{
			"weather": {URL: "http://127.0.0.1:1/weather/${parameters.city}"},
			"archive": {URL: "http://127.0.0.1:1/archive/${parameters.id}"},
		}
		cfg.Tools.Idempotent = []string{"weather"}
		resp, err := serveConfig(t, cfg).ListTools(t.Context(), &actionv1.ListToolsRequest{})
		if err != nil {
			t.Fatalf("ListTools: %v", err)
		}
		for _, tool := range resp.GetTools() {
			if want := tool.GetName() != "archive"; tool.GetIdempotent() != want {
				t.Errorf("%s: idempotent = %v, want %v", tool.GetName(), tool.GetIdempotent(), want)
			}
		}
	})
}

func TestListToolsWithoutMemory(t *testing.T) {
	client := serve(t, action.Options{})
	resp, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	var names []string
	for _, tool := range resp.GetTools() {
		names = append(names, tool.GetName())
	}
	if !slices.Equal(names, []string{"calculator", "current_time"}) {
		t.Fatalf("tools = %v, want knowledge_search only with a memory client", names)
	}
	_, err = client.Execute(t.Context(), request(t, "knowledge_search", map[string]any{"query": "x"}))
	grpctest.WantStageError(t, err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND, "knowledge_search")
}

func TestNewRejectsBadConfiguration(t *testing.T) {
	badSchema := newFakeTool("bad_schema", returns(""))
	badSchema.def.InputSchema = &structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewNumberValue(5)}}
	external := newFakeTool("external_ref", returns(""))
	secret := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(secret, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	external.def.InputSchema = &structpb.Struct{Fields: map[string]*structpb.Value{"$ref": structpb.NewStringValue("file://" + secret)}}
	table := []struct {
		name string
		opts action.Options
		want string
	}{
		{"duplicate of a built-in", action.Options{Tools: []action.Tool{newFakeTool("calculator", returns(""))}}, `duplicate tool name "calculator"`},
		{"duplicate extra tools", action.Options{Tools: []action.Tool{newFakeTool("x", returns("")), newFakeTool("x", returns(""))}}, `duplicate tool name "x"`},
		{"nil tool", action.Options{Tools: []action.Tool{nil}}, "has no definition"},
		{"nameless tool", action.Options{Tools: []action.Tool{newFakeTool("", returns(""))}}, "has no name"},
		{"schema that does not compile", action.Options{Tools: []action.Tool{badSchema}}, `tool "bad_schema": schema`},
		{"schema with an external $ref (never loaded)", action.Options{Tools: []action.Tool{external}}, `tool "external_ref": schema`},
		{"approval both ways", action.Options{RequireApproval: []string{"x"}, NoApproval: []string{"x"}}, `tool "x" is listed both`},
		// A misspelt name would leave the tool it meant to guard running without approval.
		{"approval required of a tool that does not exist", action.Options{Tools: []action.Tool{newFakeTool("weather", returns(""))}, RequireApproval: []string{"wether"}},
			`approval is required for "wether", but no tool has that name (tools: calculator, current_time, weather)`},
		// A misspelt name would leave the tool it meant to exempt waiting for approvals, to run
		// again after a crash not running again, and to fall back on no alternative.
		{"exemption from approval of a tool that does not exist", action.Options{Tools: []action.Tool{newFakeTool("find_notes", returns(""))}, NoApproval: []string{"find_note"}},
			`"find_note" is exempt from approval, but no tool has that name (tools: calculator, current_time, find_notes)`},
		{"idempotent tool that does not exist", action.Options{Tools: []action.Tool{newFakeTool("weather", returns(""))}, Idempotent: []string{"wether"}},
			`"wether" is declared idempotent, but no tool has that name (tools: calculator, current_time, weather)`},
		{"alternatives of a tool that does not exist", action.Options{Tools: []action.Tool{newFakeTool("search", returns(""))}, Alternatives: map[string][]string{"serach": {"calculator"}}},
			`alternatives are configured for "serach", but no tool has that name (tools: calculator, current_time, search)`},
		// The orchestrator tries only alternatives that run without approval: this one never ran.
		{"alternative that requires approval", action.Options{Tools: []action.Tool{newFakeTool("search", returns("")), newFakeTool("search_archive", returns(""))},
			Alternatives: map[string][]string{"search": {"search_archive"}}, RequireApproval: []string{"search_archive"}},
			`"search_archive" is configured as an alternative of "search", but it requires approval, and alternatives are tried only when they run without one`},
		{"alternative that does not exist", action.Options{Tools: []action.Tool{newFakeTool("search", returns(""))}, Alternatives: map[string][]string{"search": {"current_time", "serach_news"}}},
			`"serach_news" is configured as an alternative of "search", but no tool has that name (tools: calculator, current_time, search)`},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := action.New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestConfiguredNamesOfToolsThatDoNotExist: tools.no_approval, tools.idempotent and
// tools.alternatives naming no tool stop the action stage (New fails; the binaries exit 4), as
// tools.require_approval does; they were ignored, so a misspelt name silently left its tool
// waiting for approvals, never run again after a crash, or without its fallback.
func TestConfiguredNamesOfToolsThatDoNotExist(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools config.Tools
		want  string
	}{
		{"no_approval", config.Tools{NoApproval: []string{"add_nots"}}, `"add_nots" is exempt from approval`},
		{"idempotent", config.Tools{Idempotent: []string{"wether"}}, `"wether" is declared idempotent`},
		{"alternatives", config.Tools{Alternatives: map[string][]string{"weather": {"forecast"}}}, `"forecast" is configured as an alternative of "weather"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.RestTools = map[string]config.RestTool{
				"weather":   {URL: "http://127.0.0.1:1/weather/${parameters.city}"},
				"add_notes": {Method: "POST", URL: "http://127.0.0.1:1/notes"},
			}
			cfg.Tools = tc.tools
			opts, stop, err := action.OptionsFromConfig(t.Context(), cfg)
			if err != nil {
				t.Fatalf("OptionsFromConfig: %v", err)
			}
			t.Cleanup(func() { _ = stop() })
			opts.Logger = slog.New(slog.DiscardHandler)
			if _, err := action.New(opts); err == nil || !strings.Contains(err.Error(), tc.want+", but no tool has that name (tools: add_notes, calculator, current_time, weather)") {
				t.Fatalf("New error = %v, want one saying %s names no tool", err, tc.want)
			}
		})
	}
}

// TestListToolsVersion: the list has a version; asked with it, the stage answers unchanged
// without the tools; another list (other tools) has another version.
func TestListToolsVersion(t *testing.T) {
	client := serve(t, action.Options{})
	first, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if first.GetVersion() == "" || first.GetUnchanged() || len(first.GetTools()) == 0 {
		t.Fatalf("first answer: version %q, unchanged %v, %d tools", first.GetVersion(), first.GetUnchanged(), len(first.GetTools()))
	}
	again, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{KnownVersion: first.GetVersion()})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if !again.GetUnchanged() || again.GetVersion() != first.GetVersion() || len(again.GetTools()) != 0 {
		t.Errorf("asked with its version: unchanged %v, version %q, %d tools; want unchanged, no tools", again.GetUnchanged(), again.GetVersion(), len(again.GetTools()))
	}
	stale, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{KnownVersion: "an older version"})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if stale.GetUnchanged() || len(stale.GetTools()) != len(first.GetTools()) || stale.GetVersion() != first.GetVersion() {
		t.Errorf("asked with another version: unchanged %v, %d tools, version %q; want the whole list", stale.GetUnchanged(), len(stale.GetTools()), stale.GetVersion())
	}
	other := serve(t, action.Options{Tools: []action.Tool{newFakeTool("lookup", returns(""))}})
	resp, err := other.ListTools(t.Context(), &actionv1.ListToolsRequest{KnownVersion: first.GetVersion()})
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	if resp.GetUnchanged() || resp.GetVersion() == first.GetVersion() {
		t.Errorf("another list: unchanged %v, version %q equal to the first's", resp.GetUnchanged(), resp.GetVersion())
	}
}

package action_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	"google.golang.org/grpc/codes"
)

// restBackend is an HTTP API for REST tools: /weather/<city> answers, /notes records the
// posted body, anything else is 404.
func restBackend(t *testing.T) (*httptest.Server, chan string) {
	t.Helper()
	notes := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/weather/"):
			_, _ = io.WriteString(w, "sunny in "+strings.TrimPrefix(r.URL.Path, "/weather/"))
		case r.URL.Path == "/notes" && r.Method == http.MethodPost:
			b, _ := io.ReadAll(r.Body)
			notes <- r.Header.Get("Content-Type") + " " + string(b)
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"n1"}`)
		default:
			http.Error(w, "no route for "+r.URL.Path, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, notes
}

// serveConfig starts the service from cfg through OptionsFromConfig, with tools added, and
// stops its backends when the test ends.
func serveConfig(t *testing.T, cfg *config.Config, tools ...action.Tool) actionv1.ActionServiceClient {
	t.Helper()
	return serveEdited(t, cfg, func(o *action.Options) { o.Tools = append(o.Tools, tools...) })
}

// serveEdited is serveConfig with edit applied to the options OptionsFromConfig made.
func serveEdited(t *testing.T, cfg *config.Config, edit func(*action.Options)) actionv1.ActionServiceClient {
	t.Helper()
	opts, stop, err := action.OptionsFromConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("OptionsFromConfig: %v", err)
	}
	edit(&opts)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stopping the backends: %v", err)
		}
	})
	return serve(t, opts)
}

func TestConfiguredBackends(t *testing.T) {
	mcptest.Node(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "inside.txt"), []byte("allowed content"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret content"), 0o600); err != nil {
		t.Fatal(err)
	}
	api, notes := restBackend(t)

	cfg := config.Default()
	cfg.Queues["mcp"] = config.Queue{Concurrent: 2}
	cfg.MCPServers = map[string]config.MCPServer{
		"everything": {Command: "node", Args: []string{mcptest.Bin(t, mcptest.Everything), "stdio"}, Queue: "mcp", RequiresApproval: []string{"get-sum"}},
		"fs":         {Command: "node", Args: []string{mcptest.Bin(t, mcptest.Filesystem), root}},
		"remote":     {URL: mcptest.ServeEverythingHTTP(t)},
	}
	cfg.RestTools = map[string]config.RestTool{
		"weather": {Description: "Weather by city", URL: api.URL + "/weather/${parameters.city}",
			OutputSchema: map[string]any{"type": "object", "required": []any{"city"}}},
		"archive": {URL: api.URL + "/archive/${parameters.id}"},
		"add_note": {Method: "POST", URL: api.URL + "/notes", Body: `{"text": "${parameters.text}", "pinned": ${parameters.pinned}}`,
			InputSchema: map[string]any{"type": "object", "required": []any{"text"},
				"properties": map[string]any{"text": map[string]any{"type": "string"}, "pinned": map[string]any{"type": "boolean"}}}},
		"find_notes": {Method: "POST", URL: api.URL + "/notes/search", Body: `{"q": "${parameters.q}"}`},
	}
	cfg.Tools.NoApproval = []string{"find_notes"} // a POST that only reads, as configured
	client := serveConfig(t, cfg)

	t.Run("tools are listed with schemas, servers, queues and approval", func(t *testing.T) {
		resp, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		tools := map[string]*typev1.Tool{}
		for _, tool := range resp.GetTools() {
			tools[tool.GetName()] = tool
		}
		table := []struct {
			name, server, queue string
			approval            bool
			property            string
		}{
			{"everything__echo", "everything", "mcp", false, "message"},
			{"everything__get-sum", "everything", "mcp", true, "a"},                  // configured
			{"everything__toggle-simulated-logging", "everything", "mcp", false, ""}, // not read-only, but says nothing risky
			{"remote__echo", "remote", "default", false, "message"},
			{"fs__read_text_file", "fs", "default", false, "path"},
			{"fs__list_directory", "fs", "default", false, "path"},
			{"fs__write_file", "fs", "default", true, "content"},    // name and destructiveHint
			{"fs__edit_file", "fs", "default", true, "edits"},       // destructiveHint
			{"fs__create_directory", "fs", "default", true, "path"}, // not read-only, and "create"
			{"fs__move_file", "fs", "default", true, "source"},      // destructiveHint
			{"weather", action.RESTServer, "default", false, "city"},
			{"add_note", action.RESTServer, "default", true, "pinned"}, // POST: it may write
			{"find_notes", action.RESTServer, "default", false, "q"},   // POST, exempt by tools.no_approval
		}
		for _, tc := range table {
			tool, ok := tools[tc.name]
			if !ok {
				t.Errorf("%s is not listed", tc.name)
				continue
			}
			if tool.GetServer() != tc.server || tool.GetQueue() != tc.queue || tool.GetRequiresApproval() != tc.approval {
				t.Errorf("%s: server %q queue %q approval %v; want %q %q %v", tc.name, tool.GetServer(), tool.GetQueue(), tool.GetRequiresApproval(), tc.server, tc.queue, tc.approval)
			}
			props := tool.GetInputSchema().GetFields()["properties"].GetStructValue().GetFields()
			if tc.property != "" && props[tc.property] == nil {
				t.Errorf("%s: schema %v lacks property %q", tc.name, tool.GetInputSchema(), tc.property)
			}
		}
		if req := tools["weather"].GetInputSchema().GetFields()["required"].GetListValue().GetValues(); len(req) != 1 || req[0].GetStringValue() != "city" {
			t.Errorf("weather's default schema requires %v, want [city]", req)
		}
		if out := tools["weather"].GetOutputSchema().AsMap(); out["type"] != "object" || tools["add_note"].GetOutputSchema() != nil {
			t.Errorf("output schemas: weather %v, add_note %v; want weather's configured one and none", out, tools["add_note"].GetOutputSchema())
		}
	})

	success := []struct {
		name    string
		tool    string
		args    map[string]any
		approve bool
		want    string
		server  string
	}{
		{"stdio echo", "everything__echo", map[string]any{"message": "hi"}, false, "Echo: hi", "everything"},
		{"approved stdio call", "everything__get-sum", map[string]any{"a": 2, "b": 3}, true, "The sum of 2 and 3 is 5.", "everything"},
		{"streamable HTTP echo", "remote__echo", map[string]any{"message": "far"}, false, "Echo: far", "remote"},
		{"file inside the root", "fs__read_text_file", map[string]any{"path": filepath.Join(root, "inside.txt")}, false, "allowed content", "fs"},
		{"rest placeholder in the path", "weather", map[string]any{"city": "São Paulo"}, false, "sunny in São Paulo", action.RESTServer},
		{"rest json body", "add_note", map[string]any{"text": `say "hi"`, "pinned": true}, true, `{"id":"n1"}`, action.RESTServer},
	}
	for _, tc := range success {
		t.Run(tc.name, func(t *testing.T) {
			req := request(t, tc.tool, tc.args)
			if tc.approve {
				req.Approval = approved(t, req)
			}
			resp, err := client.Execute(t.Context(), req)
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != tc.want || resp.GetServer() != tc.server {
				t.Fatalf("got %v, want result %q from %s", resp, tc.want, tc.server)
			}
		})
	}
	if got := <-notes; got != `application/json {"text": "say \"hi\"", "pinned": true}` {
		t.Errorf("the REST backend received %s", got)
	}

	failures := []struct {
		name string
		tool string
		args map[string]any
		want []string
	}{
		{"MCP isError result", "everything__gzip-file-as-resource", map[string]any{"data": "ftp://example.com/x"}, []string{"Unsupported URL protocol"}},
		{"file outside the root is refused", "fs__read_text_file", map[string]any{"path": outside}, []string{"Access denied - path outside allowed directories"}},
		{"rest non-2xx", "archive", map[string]any{"id": "a b"}, []string{"HTTP 404 Not Found: no route for /archive/a b"}},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.Execute(t.Context(), request(t, tc.tool, tc.args))
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || resp.GetErrorCode() != typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR {
				t.Fatalf("got %v, want an execution error", resp)
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.GetError(), w) {
					t.Errorf("error %q does not contain %q", resp.GetError(), w)
				}
			}
			if strings.Contains(resp.GetResult(), "secret content") {
				t.Error("the refused file's content leaked")
			}
		})
	}

	refusals := []struct {
		name     string
		tool     string
		args     map[string]any
		grpcCode codes.Code
		code     typev1.StageErrorCode
		want     []string
	}{
		{"MCP schema checked before the call", "everything__echo", map[string]any{"message": 5}, codes.InvalidArgument,
			typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS, []string{"invalid arguments for tool everything__echo", `"message"`}},
		{"REST default schema", "weather", map[string]any{}, codes.InvalidArgument,
			typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS, []string{"missing property 'city'"}},
		{"configured approval", "everything__get-sum", map[string]any{"a": 1, "b": 2}, codes.PermissionDenied,
			typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, []string{"tool everything__get-sum requires approval"}},
		{"destructive by annotation", "fs__write_file", map[string]any{"path": filepath.Join(root, "x"), "content": "x"}, codes.PermissionDenied,
			typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, []string{"tool fs__write_file requires approval"}},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Execute(t.Context(), request(t, tc.tool, tc.args))
			grpctest.WantStageError(t, err, tc.grpcCode, tc.code, tc.want...)
		})
	}
	if _, err := os.Stat(filepath.Join(root, "x")); !os.IsNotExist(err) {
		t.Errorf("an unapproved write reached the disk: %v", err)
	}
}

func TestOptionsFromConfigFailures(t *testing.T) {
	mcptest.Node(t)
	table := []struct {
		name  string
		edit  func(cfg *config.Config)
		code  int
		parts []string
	}{
		{"MCP command that does not exist", func(cfg *config.Config) {
			cfg.MCPServers = map[string]config.MCPServer{"ghost": {Command: "agentmesh-no-such-server"}}
		}, exitcode.Unavailable, []string{`MCP server "ghost"`, `command "agentmesh-no-such-server" not found`}},
		{"MCP server that exits at start", func(cfg *config.Config) {
			cfg.MCPServers = map[string]config.MCPServer{"crash": {Command: "node", Args: []string{"-e", "console.error('missing API key'); process.exit(2)"}}}
		}, exitcode.Unavailable, []string{`MCP server "crash"`, "missing API key"}},
		{"approval for a tool the server lacks", func(cfg *config.Config) {
			cfg.MCPServers = map[string]config.MCPServer{"everything": {Command: "node", Args: []string{mcptest.Bin(t, mcptest.Everything)}, RequiresApproval: []string{"ech0"}}}
		}, exitcode.Invalid, []string{`MCP server "everything" has no tool "ech0"`}},
		{"REST template that does not parse", func(cfg *config.Config) {
			cfg.RestTools = map[string]config.RestTool{"broken": {URL: "https://api.example.com/${parameters.city"}}
		}, exitcode.Invalid, []string{"rest_tools.broken", "unterminated placeholder"}},
		{"REST header naming the user", func(cfg *config.Config) {
			cfg.RestTools = map[string]config.RestTool{"notes": {URL: "https://api.example.com/notes", Headers: map[string]string{"X-Agentmesh-User": "${parameters.user}"}}}
		}, exitcode.Invalid, []string{"rest_tools.notes", `header "X-Agentmesh-User": the action stage sets it`}},
		{"REST header naming the approver", func(cfg *config.Config) {
			cfg.RestTools = map[string]config.RestTool{"notes": {URL: "https://api.example.com/notes", Headers: map[string]string{"x-agentmesh-approver": "ops"}}}
		}, exitcode.Invalid, []string{"rest_tools.notes", `header "x-agentmesh-approver": the action stage sets it to who approved the call`}},
		// A placeholder the schema does not offer the model is never filled: every request would
		// go without its value (an empty query value, a JSON null), and nothing would say so.
		{"REST placeholder that is no property of the input schema", func(cfg *config.Config) {
			cfg.RestTools = map[string]config.RestTool{"weather": {URL: "https://api.example.com/weather?q=${parameters.cty}&units=${parameters.units}",
				InputSchema: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "units": map[string]any{"type": "string"}}}}}
		}, exitcode.Invalid, []string{"rest_tools.weather", "placeholder ${parameters.cty} names no property of the input schema (properties: city, units)"}},
		{"REST placeholder with an input schema without properties", func(cfg *config.Config) {
			cfg.RestTools = map[string]config.RestTool{"notes": {Method: "POST", URL: "https://api.example.com/notes", Body: `{"text": "${parameters.text}"}`,
				InputSchema: map[string]any{"type": "object"}}}
		}, exitcode.Invalid, []string{"rest_tools.notes", "placeholder ${parameters.text} names no property of the input schema (properties: none)"}},
		{"REST output schema that does not compile", func(cfg *config.Config) {
			cfg.RestTools = map[string]config.RestTool{"weather": {URL: "https://api.example.com/", OutputSchema: map[string]any{"type": 7}}}
		}, exitcode.Schema, []string{"rest_tools.weather", "output schema"}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tc.edit(cfg)
			_, stop, err := action.OptionsFromConfig(t.Context(), cfg)
			if err == nil {
				_ = stop()
				t.Fatal("OptionsFromConfig succeeded")
			}
			if got := exitcode.Of(err); got != tc.code {
				t.Errorf("exit code %d, want %d (%v)", got, tc.code, err)
			}
			for _, p := range tc.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not contain %q", err, p)
				}
			}
		})
	}
}

// TestMCPToolsAfterClose shows that a call to a server that is not running is retried as a
// transient failure, then reported with the reason; none of its attempts counts, since none
// reached the server.
func TestMCPToolsAfterClose(t *testing.T) {
	mcptest.Node(t)
	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"everything": {Command: "node", Args: []string{mcptest.Bin(t, mcptest.Everything)}}}
	opts, stop, err := action.OptionsFromConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := serve(t, opts)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Execute(context.WithoutCancel(t.Context()), request(t, "everything__echo", map[string]any{"message": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || resp.GetAttempts() != 0 ||
		!strings.Contains(resp.GetError(), `MCP server "everything" is unavailable: closed`) {
		t.Fatalf("call to a stopped server: %v, want an execution error with no attempt that reached it", resp)
	}
}

// TestACallToARemoteMCPServerThatIsDownReachedNothing: a call to a remote MCP server that
// refuses connections is retried, as a server being restarted is, and reported with no attempt
// that reached it; it was reported after one attempt, as a failure of the tool.
func TestACallToARemoteMCPServerThatIsDownReachedNothing(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "records", Version: "1.0.0"}, nil)
	type args struct {
		ID string `json:"id"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "show_record", Description: "Shows a record.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, args) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a record"}}}, nil, nil
		})
	url, stop := mcptest.ServeHTTP(t, srv)

	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"records": {URL: url}}
	client := serveConfig(t, cfg)
	resp, err := client.Execute(t.Context(), request(t, "records__show_record", map[string]any{"id": "1"}))
	if err != nil || resp.GetResult() != "a record" {
		t.Fatalf("show_record: %v, %v", resp, err)
	}

	stop()
	// A call may still find a connection the server closed, which counts as an attempt; the
	// next ones find the port closed.
	mcptest.Poll(t, 10*time.Second, "a call refused by the closed port, with no attempt that reached it", func() bool {
		resp, err = client.Execute(t.Context(), request(t, "records__show_record", map[string]any{"id": "1"}))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(resp.GetError(), "connection refused") && resp.GetAttempts() == 0
	})
	if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR {
		t.Errorf("a call to a server that refuses connections: status %v (%s), want an error", resp.GetStatus(), resp.GetError())
	}
}

// TestConfiguredMCPLimits reads the limits of real stdio MCP children in /proc: a server
// without a limits section gets the defaults, and one with overrides gets them, -1 lifting a
// limit. The process limit is the user's running tasks plus the configured headroom.
func TestConfiguredMCPLimits(t *testing.T) {
	mcptest.Node(t)
	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{
		"plain": {Command: "node", Args: []string{mcptest.Bin(t, mcptest.Everything)}, Env: map[string]string{childMarker: t.Name() + "/plain"}},
		"tight": {Command: "node", Args: []string{mcptest.Bin(t, mcptest.Everything)}, Env: map[string]string{childMarker: t.Name() + "/tight"},
			Limits: config.MCPLimits{CPUSeconds: 120, AddressSpaceBytes: -1, Processes: 64, FileSizeBytes: 1 << 20}},
	}
	serveConfig(t, cfg)

	for _, tc := range []struct {
		server string
		want   map[string]string
	}{
		{"plain", map[string]string{"Max cpu time": "3600", "Max address space": "8589934592", "Max open files": "1024",
			"Max file size": "unlimited", "Max core file size": "0"}},
		{"tight", map[string]string{"Max cpu time": "120", "Max address space": "unlimited", "Max open files": "1024",
			"Max file size": "1048576", "Max core file size": "0"}},
	} {
		pid := mcptest.ChildPID(t, childMarker, t.Name()+"/"+tc.server)
		for name, want := range tc.want {
			if soft, hard := mcptest.Limit(t, pid, name); soft != want || hard != want {
				t.Errorf("%s: %s soft %s hard %s, want %s", tc.server, name, soft, hard, want)
			}
		}
	}
	for server, headroom := range map[string]int{"plain": 256, "tight": 64} {
		soft, _ := mcptest.Limit(t, mcptest.ChildPID(t, childMarker, t.Name()+"/"+server), "Max processes")
		if n, err := strconv.Atoi(soft); err != nil || n <= headroom {
			t.Errorf("%s: process limit %s, want the user's running tasks plus %d", server, soft, headroom)
		}
	}
}

func TestMCPLimitsConfigErrors(t *testing.T) {
	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{
		"stdio":  {Command: "node", Limits: config.MCPLimits{CPUSeconds: -2}},
		"remote": {URL: "http://127.0.0.1:1/mcp", Limits: config.MCPLimits{Processes: 10}},
	}
	err := cfg.Validate()
	for _, want := range []string{
		"mcp_servers.stdio.limits.cpu_seconds: must be positive, 0 (the default) or -1 (no limit), got -2",
		"mcp_servers.remote.limits: resource limits apply to stdio servers (command), not to a remote server",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to contain %q", err, want)
		}
	}
}

// TestAGatewayFailureRetriesOnlyACallThatMayRunTwice: a gateway's 502 or 504 may come after
// the gateway passed the request on, so the backend may have run it; the call is retried
// only when running it twice does no harm (a safe method, or a tool declared idempotent). A
// 429 or 503 says the server did not process it, and is retried whatever the method. A POST
// that answered 502 was sent again, so a non-idempotent tool ran twice.
func TestAGatewayFailureRetriesOnlyACallThatMayRunTwice(t *testing.T) {
	var (
		mu   sync.Mutex
		hits = map[string]int{}
	)
	failures := map[string]int{"/read": http.StatusBadGateway, "/pay": http.StatusBadGateway, "/order": http.StatusGatewayTimeout,
		"/put": http.StatusBadGateway, "/busy": http.StatusServiceUnavailable, "/slow": http.StatusTooManyRequests}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		first := hits[r.URL.Path] == 1
		mu.Unlock()
		if first {
			http.Error(w, "upstream trouble", failures[r.URL.Path])
			return
		}
		_, _ = io.WriteString(w, "done")
	}))
	t.Cleanup(api.Close)

	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"read":  {URL: api.URL + "/read"},
		"pay":   {Method: "POST", URL: api.URL + "/pay"},
		"order": {Method: "POST", URL: api.URL + "/order"},
		"put":   {Method: "PUT", URL: api.URL + "/put"},
		"busy":  {Method: "POST", URL: api.URL + "/busy"},
		"slow":  {Method: "POST", URL: api.URL + "/slow"},
	}
	cfg.Tools.NoApproval = []string{"pay", "order", "put", "busy", "slow"}
	cfg.Tools.Idempotent = []string{"put"}
	client := serveEdited(t, cfg, func(o *action.Options) { o.RetryBase = time.Millisecond })

	table := []struct {
		tool     string
		status   typev1.ToolStatus
		attempts int32
		errText  string
	}{
		{"read", typev1.ToolStatus_TOOL_STATUS_SUCCESS, 2, ""},                                          // GET: safe
		{"pay", typev1.ToolStatus_TOOL_STATUS_ERROR, 1, "HTTP 502 Bad Gateway: upstream trouble"},       // may have paid
		{"order", typev1.ToolStatus_TOOL_STATUS_ERROR, 1, "HTTP 504 Gateway Timeout: upstream trouble"}, // may have ordered
		{"put", typev1.ToolStatus_TOOL_STATUS_SUCCESS, 2, ""},                                           // declared idempotent
		{"busy", typev1.ToolStatus_TOOL_STATUS_SUCCESS, 2, ""},                                          // 503: not processed
		{"slow", typev1.ToolStatus_TOOL_STATUS_SUCCESS, 2, ""},                                          // 429: not processed
	}
	for _, tc := range table {
		t.Run(tc.tool, func(t *testing.T) {
			resp, err := client.Execute(t.Context(), request(t, tc.tool, map[string]any{}))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			n := hits["/"+tc.tool]
			mu.Unlock()
			if resp.GetStatus() != tc.status || resp.GetAttempts() != tc.attempts || resp.GetError() != tc.errText || n != int(tc.attempts) {
				t.Errorf("status %v attempts %d error %q, backend hit %d times; want %v, %d attempts, error %q",
					resp.GetStatus(), resp.GetAttempts(), resp.GetError(), n, tc.status, tc.attempts, tc.errText)
			}
		})
	}
}

// TestAToolOfAReservedNameIsRefused: the orchestrator offers the model tools of its own
// (final_report, and the XML transport's agent__final_report and agent__progress_report) and
// takes a call of those names as its own, so a tool of the action stage of such a name would
// be offered twice (a provider refuses the request) or never run. The stage refuses to start
// with one, whatever its kind: a REST tool, an MCP tool whose name in the mesh is reserved
// (server agent, tool final_report; progress.report, whose '.' becomes '_'), a Go tool.
func TestAToolOfAReservedNameIsRefused(t *testing.T) {
	mcpServer := func(tool string) string {
		srv := sdk.NewServer(&sdk.Implementation{Name: "agent", Version: "1.0.0"}, nil)
		sdk.AddTool(srv, &sdk.Tool{Name: tool, Description: "Files a report."},
			func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "filed"}}}, nil, nil
			})
		hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	table := []struct {
		name  string
		setup func(cfg *config.Config) []action.Tool
		want  string
	}{
		{"REST tool", func(cfg *config.Config) []action.Tool {
			cfg.RestTools = map[string]config.RestTool{"final_report": {URL: "http://127.0.0.1:1/report"}}
			return nil
		}, "final_report"},
		{"MCP tool", func(cfg *config.Config) []action.Tool {
			cfg.MCPServers = map[string]config.MCPServer{"agent": {URL: mcpServer("final_report")}}
			return nil
		}, "agent__final_report"},
		{"MCP tool renamed in the mesh", func(cfg *config.Config) []action.Tool {
			cfg.MCPServers = map[string]config.MCPServer{"agent": {URL: mcpServer("progress.report")}}
			return nil
		}, "agent__progress_report"},
		{"Go tool", func(*config.Config) []action.Tool {
			return []action.Tool{newFakeTool("final_report", func(context.Context, action.Call) (string, error) { return "", nil })}
		}, "final_report"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			tools := tc.setup(cfg)
			opts, stop, err := action.OptionsFromConfig(t.Context(), cfg)
			if err != nil {
				t.Fatalf("OptionsFromConfig: %v", err)
			}
			t.Cleanup(func() { _ = stop() })
			opts.Tools = append(opts.Tools, tools...)
			opts.Grants, opts.Logger = testVerifier, slog.New(slog.DiscardHandler)
			_, err = action.New(opts)
			want := `tool "` + tc.want + `": the name is reserved for one of the orchestrator's own tools (final_report, agent__final_report, agent__progress_report)`
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("New: %v, want an error saying %q", err, want)
			}
		})
	}
}

// TestAGoToolOfANameProvidersRefuseIsRefused: a tool given in code (Options.Tools) must have a
// name model providers take, 1 to 64 letters, digits, _ and -, as the configuration's REST
// tools must: the stage started with one, listed it, and every run offered it failed at the
// provider, which refuses the whole request. A name of 64 is taken.
func TestAGoToolOfANameProvidersRefuseIsRefused(t *testing.T) {
	noop := func(context.Context, action.Call) (string, error) { return "", nil }
	for _, name := range []string{"send email", "fs.read", "résumé", strings.Repeat("t", 65)} {
		_, err := action.New(action.Options{Tools: []action.Tool{newFakeTool(name, noop)}, Grants: testVerifier, Logger: slog.New(slog.DiscardHandler)})
		want := fmt.Sprintf("tool %q: a tool's name is 1 to 64 letters, digits, _ and - (model providers refuse other function names)", name)
		if err == nil || err.Error() != want {
			t.Errorf("New with a tool named %q: %v, want %q", name, err, want)
		}
	}
	if _, err := action.New(action.Options{Tools: []action.Tool{newFakeTool(strings.Repeat("t", 64), noop)}, Grants: testVerifier, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Errorf("New with a tool name of 64 bytes: %v", err)
	}
}

// TestAnMCPToolBothRequiringApprovalAndExemptIsRefused: an MCP server's binding that requires
// approval for a tool (MCPBinding.RequiresApproval), by any of its names, and NoApproval naming
// that tool contradict each other, as the configuration's mcp_servers.<name>.requires_approval
// and tools.no_approval do, which the config validator refuses. Built in code, the stage
// started with the tool exempt, running it without approval though its binding asked for one.
func TestAnMCPToolBothRequiringApprovalAndExemptIsRefused(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "fs", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "write_file", Description: "Writes a file."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "written"}}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	m, err := mcp.Start(t.Context(), []mcp.Server{{Name: "fs", URL: hs.URL}}, mcp.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	for _, listed := range []string{"write_file", "fs__write_file"} {
		tools, err := action.MCPTools(m, map[string]action.MCPBinding{"fs": {RequiresApproval: []string{listed}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = action.New(action.Options{Tools: tools, NoApproval: []string{"fs__write_file"}, Grants: testVerifier, Logger: slog.New(slog.DiscardHandler)})
		want := `tool "fs__write_file" is listed both as requiring approval (by its MCP server's binding) and as exempt from it`
		if err == nil || err.Error() != want {
			t.Errorf("New with %q required by the binding and exempt: %v, want %q", listed, err, want)
		}
	}
}

// TestARateLimitedCallWaitsAsTheServerAsks: a REST 429 or 503 with Retry-After is retried no
// sooner than the server asked; one that asks for longer than the call has left is not retried
// at all. The retries came after the stage's own backoff (here 1 ms), so a call answered
// "Retry-After: 120" hit the server four times in a moment and failed anyway.
func TestARateLimitedCallWaitsAsTheServerAsks(t *testing.T) {
	var (
		mu   sync.Mutex
		hits = map[string][]time.Time{}
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path] = append(hits[r.URL.Path], time.Now())
		first := len(hits[r.URL.Path]) == 1
		mu.Unlock()
		switch {
		case r.URL.Path == "/later":
			w.Header().Set("Retry-After", "120")
			http.Error(w, "come back in two minutes", http.StatusTooManyRequests)
		case r.URL.Path == "/never":
			// Over 3,000 years: past 32 bits of seconds.
			w.Header().Set("Retry-After", "99999999999")
			http.Error(w, "come back much later", http.StatusTooManyRequests)
		case first:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "down for a second", http.StatusServiceUnavailable)
		default:
			_, _ = io.WriteString(w, "done")
		}
	}))
	t.Cleanup(api.Close)

	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"later": {URL: api.URL + "/later"}, "soon": {URL: api.URL + "/soon"},
		"never": {URL: api.URL + "/never"},
	}
	client := serveEdited(t, cfg, func(o *action.Options) { o.RetryBase = time.Millisecond })

	t.Run("asked to wait longer than the call has", func(t *testing.T) {
		req := request(t, "later", map[string]any{})
		req.TimeoutMs = 5000
		resp, err := client.Execute(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := len(hits["/later"])
		mu.Unlock()
		if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || resp.GetAttempts() != 1 || n != 1 ||
			resp.GetError() != "HTTP 429 Too Many Requests: come back in two minutes" {
			t.Errorf("status %v attempts %d error %q, server hit %d times; want the 429 after one attempt", resp.GetStatus(), resp.GetAttempts(), resp.GetError(), n)
		}
	})
	// A wait too long to count in seconds is one the call cannot make either; it read as no
	// wait, and the call was retried at once.
	t.Run("asked to wait longer than seconds count", func(t *testing.T) {
		resp, err := client.Execute(t.Context(), request(t, "never", map[string]any{}))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := len(hits["/never"])
		mu.Unlock()
		failed := resp.GetStatus() == typev1.ToolStatus_TOOL_STATUS_ERROR
		if !failed || resp.GetAttempts() != 1 || n != 1 {
			t.Errorf("status %v attempts %d, server hit %d times; want the 429 after one attempt",
				resp.GetStatus(), resp.GetAttempts(), n)
		}
	})
	t.Run("asked to wait a second", func(t *testing.T) {
		resp, err := client.Execute(t.Context(), request(t, "soon", map[string]any{}))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		at := hits["/soon"]
		mu.Unlock()
		if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetAttempts() != 2 || len(at) != 2 {
			t.Fatalf("status %v attempts %d error %q, server hit %d times; want success after 2 attempts", resp.GetStatus(), resp.GetAttempts(), resp.GetError(), len(at))
		}
		if gap := at[1].Sub(at[0]); gap < time.Second {
			t.Errorf("retried %v after the 503, want at least the 1 s Retry-After asked for", gap)
		}
	})
}

// TestAnMCPResultOverTheLimitFailsTheCall: an MCP tool's result had no limit, unlike a REST
// tool's body (rest.MaxResponseBytes), so a result over the mesh's gRPC message limit failed
// the Execute RPC itself with RESOURCE_EXHAUSTED after the tool ran, and so did every retry,
// answered from the ledger. A result over mcp.MaxResultBytes fails the call, saying so.
func TestAnMCPResultOverTheLimitFailsTheCall(t *testing.T) {
	srv := sdk.NewServer(&sdk.Implementation{Name: "dump", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "dump", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			text := strings.Repeat("x", mcp.MaxResultBytes+1)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
		})
	url, _ := mcptest.ServeHTTP(t, srv)
	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"dump": {URL: url}}
	client := serveConfig(t, cfg)
	resp, err := client.Execute(t.Context(), request(t, "dump__dump", nil))
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	want := fmt.Sprintf("result is larger than %d bytes", mcp.MaxResultBytes)
	if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || !strings.Contains(resp.GetError(), want) {
		t.Errorf("a result over the limit: status %v, error %q, want an error saying %q", resp.GetStatus(), resp.GetError(), want)
	}
}

package mesh_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"google.golang.org/protobuf/encoding/protojson"
)

// The secrets of TestSecretsStaySecret: a provider key, an MCP server's environment variable and
// a REST tool's header.
const (
	providerSecret = "sk-agentmesh-provider-7f3a9c"
	mcpSecret      = "mcp-env-secret-51d2e8"
	restSecret     = "rest-header-secret-c04b6a"
)

// TestSecretsStaySecret (issue 12.6): a run that uses a provider key, a stdio MCP server with a
// secret in its environment and a REST tool with a secret header, with a failed LLM attempt
// along the way, writes none of the secrets to its events, the services' logs (at debug level),
// its spans or its stored result; and each secret was really used, so the test cannot pass by
// never touching them.
func TestSecretsStaySecret(t *testing.T) {
	logs := &logtest.Buffer{} // the stages that log to slog.Default
	restore := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(restore) })

	var restAuth []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		restAuth = append(restAuth, r.Header.Get("Authorization"))
		fmt.Fprint(w, `{"forecast": "sunny"}`)
	}))
	t.Cleanup(api.Close)

	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"everything": {
		Command: "node", Args: []string{everythingServer(t)},
		Env: map[string]string{"MCP_SECRET_TOKEN": mcpSecret},
	}}
	cfg.RestTools = map[string]config.RestTool{"weather": {
		Description: "The weather in a city.", URL: api.URL + "/weather?q=${parameters.city}",
		Headers: map[string]string{"Authorization": "Bearer " + restSecret},
	}}
	h := startWith(t, cfg, func(cfg *config.Config, _ string) {
		p := cfg.Providers["scripted"]
		p.APIKey = providerSecret
		cfg.Providers["scripted"] = p
	}, llmtest.Scenario{Name: "secrets", Match: "use every tool", Turns: []llmtest.Turn{
		{Failure: llmtest.FailModelError, FailuresBeforeSuccess: 1, ToolCalls: []llmtest.ToolCall{
			{ID: "w", Name: "weather", Arguments: `{"city": "Oslo"}`},
			{ID: "e", Name: "everything__echo", Arguments: `{"message": "hello"}`},
		}},
		text("Sunny in Oslo, and the echo said hello."),
	}})

	res := h.run(t, &agentv1.RunRequest{Message: "use every tool"})
	if !res.GetSuccess() || res.GetToolCalls() != 2 {
		t.Fatalf("run: %s %s with %d tool calls, want success with 2", res.GetOutcome(), res.GetExitReason(), res.GetToolCalls())
	}

	// The secrets were used.
	for _, r := range h.llm.Requests() {
		if r.Header.Get("Authorization") != "Bearer "+providerSecret {
			t.Errorf("a provider request carried %q, not the configured key", r.Header.Get("Authorization"))
		}
	}
	if len(restAuth) != 1 || restAuth[0] != "Bearer "+restSecret {
		t.Errorf("the REST tool's server saw authorization %q", restAuth)
	}
	if !childHasEnv(t, "MCP_SECRET_TOKEN="+mcpSecret) {
		t.Error("no child process has the MCP server's secret in its environment")
	}

	// And written nowhere.
	evs, _ := h.storedEvents(t, res.GetRunId())
	var events strings.Builder
	for _, ev := range evs {
		events.WriteString(protojson.Format(ev))
	}
	var spans strings.Builder
	for _, s := range h.recorder.Spans() {
		fmt.Fprintf(&spans, "%s %v %v %v\n", s.Name(), s.Attributes(), s.Events(), s.Status())
	}
	stored, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	result, err := json.Marshal(json.RawMessage(protojson.Format(stored)))
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{
		"events": events.String(), "logs": logs.String() + h.logs.String(), "spans": spans.String(), "result": string(result),
	} {
		if text == "" {
			t.Errorf("nothing to search in the %s", where)
		}
		for _, secret := range []string{providerSecret, mcpSecret, restSecret} {
			if strings.Contains(text, secret) {
				t.Errorf("the secret %q was written to the %s", secret, where)
			}
		}
	}
}

// everythingServer is the script of the MCP reference server that services/action/testdata
// installs from npm.
func everythingServer(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "services", "action", "testdata",
		"node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("the MCP reference server is not installed (%v): run `npm ci --prefix services/action/testdata`", err)
	}
	return script
}

// childHasEnv reports whether a child process of this one has the environment entry kv.
func childHasEnv(t *testing.T, kv string) bool {
	t.Helper()
	self := fmt.Sprint(os.Getpid())
	entries, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, stat := range entries {
		raw, err := os.ReadFile(stat)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(stat), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+kv+"\x00")) {
			return true
		}
	}
	return false
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestRunExitCodeOfASchemaFailure (issue 11.7): `agentmesh run --schema` asks for a JSON answer
// matching the schema; a run whose final report fails the schema, also in the final turn it
// gets to fix it, ends FINAL_REPORT_INVALID and exits 5 (seed 000: schema validation
// failures), a valid one exits 0, and a schema file that cannot be used exits 4.
func TestRunExitCodeOfASchemaFailure(t *testing.T) {
	isolate(t)
	report := func(args string) llmtest.Turn {
		return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "final_report", Arguments: args}}}
	}
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "invalid", Match: "answer badly", Turns: []llmtest.Turn{
			report(`{"report_format":"json","content_json":{"answer":"forty-two"}}`),
			report(`{"report_format":"json","content_json":{}}`),
		}},
		llmtest.Scenario{Name: "valid", Match: "answer well", Turns: []llmtest.Turn{
			report(`{"report_format":"json","content_json":{"answer":42}}`),
		}},
	)
	cfg := config.Default()
	cfg.Providers["scripted"] = config.Provider{Type: "openai", BaseURL: llm.URL(), APIKey: "test-key"}
	cfg.Targets = []config.Target{{Provider: "scripted", Model: "gpt-test"}}
	addr := startMesh(t, cfg).Addr("orchestrator")
	dir := writeFiles(t, map[string]string{
		"schema.json":  `{"type":"object","properties":{"answer":{"type":"number"}},"required":["answer"]}`,
		"list.json":    `["not", "an", "object"]`,
		"garbage.json": `{"type":`,
	})
	schema := filepath.Join(dir, "schema.json")

	_, errOut := runCLI(t, 5, "run", "--addr", addr, "--schema", schema, "answer badly")
	if !strings.Contains(errOut, "FINAL_REPORT_INVALID") {
		t.Errorf("progress does not show the exit reason:\n%s", errOut)
	}
	if out, _ := runCLI(t, 0, "run", "--addr", addr, "--schema", schema, "answer well"); !strings.Contains(out, `"answer":42`) {
		t.Errorf("answer %q", out)
	}
	for _, bad := range []string{"list.json", "garbage.json", "missing.json"} {
		if _, errOut := runCLI(t, 4, "run", "--addr", addr, "--schema", filepath.Join(dir, bad), "answer well"); !strings.Contains(errOut, "--schema") {
			t.Errorf("--schema %s: %s", bad, errOut)
		}
	}
	if n := len(llm.Requests()); n != 3 {
		t.Errorf("%d LLM requests, want 2 for the invalid run and 1 for the valid one", n)
	}
}

// TestRunExitCodeOfAnUnusableContract: a configuration whose model leaves no room for the
// conversation is a configuration error, exit 4, refused when it is loaded and naming the
// model; it loaded, and every run failed its preflight (INVALID_CONTRACT).
func TestRunExitCodeOfAnUnusableContract(t *testing.T) {
	isolate(t)
	tiny := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(tiny, []byte("providers:\n  rules:\n    models:\n      rules-v1: {context_window: 1000}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut := runCLI(t, 4, "dev", "--config", tiny, "--run", "What is 6 times 7?"); !strings.Contains(errOut, "providers.rules.models.rules-v1: a context_window of 1000 leaves no room") {
		t.Errorf("the error does not name the model's window:\n%s", errOut)
	}
}

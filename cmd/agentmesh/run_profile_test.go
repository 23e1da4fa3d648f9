package main

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestRunProfile (issue 13.6): `agentmesh run --profile NAME` runs the agent profile NAME of
// agentmesh.yaml, whose prompt opens the model's request; a profile that is not configured is
// a usage error, exit 4.
func TestRunProfile(t *testing.T) {
	isolate(t)
	llm := llmtest.New(t, llmtest.Scenario{Name: "terse", Match: "Describe Go", Turns: []llmtest.Turn{{Content: "Simple."}}})
	cfg := config.Default()
	cfg.Providers["scripted"] = config.Provider{Type: "openai", BaseURL: llm.URL(), APIKey: "test-key"}
	cfg.Profiles = map[string]config.Profile{"terse": {
		Prompts: config.Prompts{System: "Answer in one word."},
		Targets: []config.Target{{Provider: "scripted", Model: "gpt-test"}},
	}}
	addr := startMesh(t, cfg).Addr("orchestrator")

	if out, _ := runCLI(t, 0, "run", "--addr", addr, "--profile", "terse", "Describe Go"); !strings.Contains(out, "Simple.") {
		t.Errorf("the answer is not printed: %q", out)
	}
	if reqs := llm.Requests(); len(reqs) != 1 || !strings.HasPrefix(string(reqs[0].Messages[0].Content), "Answer in one word.\n\n") {
		t.Errorf("the profile's prompt does not open the model's request: %+v", reqs)
	}
	if _, errOut := runCLI(t, 4, "run", "--addr", addr, "--profile", "chatty", "Describe Go"); !strings.Contains(errOut, `profile "chatty" is not configured (configured: terse)`) {
		t.Errorf("an unknown profile: %q", errOut)
	}
}

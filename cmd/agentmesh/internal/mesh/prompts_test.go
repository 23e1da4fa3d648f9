package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Seed 004's constitution and seed 002's retrieval rules, as an operator would configure them.
const (
	constitution = "## Behavioral Rules\n1. Only use tools when the user clearly wants a task operation.\n" +
		"2. If the user's intent is unclear, ask a clarifying question."
	retrieval = "Search the documentation with knowledge_search before answering any technical question, and cite " +
		"the references you use. If the search finds nothing, say exactly: \"I don't have enough information in the " +
		"current documentation to answer that.\""
)

// systemMessage is the system message of the provider request that answered message.
func systemMessage(t *testing.T, h *harness, message string) (model, system string) {
	t.Helper()
	reqs := requestsAbout(h, message)
	if len(reqs) != 1 || len(reqs[0].Messages) == 0 || reqs[0].Messages[0].Role != "system" {
		t.Fatalf("%d provider requests answered %q, want 1 that opens with a system message", len(reqs), message)
	}
	return reqs[0].Model, string(reqs[0].Messages[0].Content)
}

// TestConfiguredPrompts (issue 13.6): the prompts of agentmesh.yaml (system prompt, seed 004's
// constitution, seed 002's retrieval rules) make the system message of every run; a run that
// names a profile gets the profile's prompts (the others inherited) and targets; an unknown
// profile is INVALID_ARGUMENT.
func TestConfiguredPrompts(t *testing.T) {
	answer := func(message string) llmtest.Scenario {
		return llmtest.Scenario{Name: message, Match: message, Turns: []llmtest.Turn{text("Answered.")}}
	}
	h := startWith(t, nil, func(cfg *config.Config, _ string) {
		cfg.Prompts = config.Prompts{System: "You are DocsBot, the assistant of the Somnia documentation.", Constitution: constitution, Retrieval: retrieval}
		cfg.Profiles = map[string]config.Profile{
			"support": {Prompts: config.Prompts{System: "You are SupportBot."}, Targets: []config.Target{{Provider: "scripted2", Model: "support-model"}}},
		}
	}, answer("How do validators join the network?"), answer("My node does not sync"))

	res := h.run(t, &agentv1.RunRequest{Message: "How do validators join the network?"})
	if !res.GetSuccess() {
		t.Fatalf("default profile: outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	model, system := systemMessage(t, h, "How do validators join the network?")
	want := "You are DocsBot, the assistant of the Somnia documentation.\n\n" + constitution + "\n\n" + retrieval + "\n\nTask type: question"
	if model != "gpt-test" || system != want {
		t.Errorf("default profile: %s got the system message %q, want gpt-test with %q", model, system, want)
	}
	if !strings.Contains(system, "I don't have enough information in the current documentation to answer that.") {
		t.Errorf("the system message lacks seed 002's refusal sentence: %q", system)
	}

	res = h.run(t, &agentv1.RunRequest{Message: "My node does not sync", Profile: "support"})
	if !res.GetSuccess() {
		t.Fatalf("support profile: outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	model, system = systemMessage(t, h, "My node does not sync")
	want = "You are SupportBot.\n\n" + constitution + "\n\n" + retrieval + "\n\nTask type: question"
	if model != "support-model" || system != want {
		t.Errorf("support profile: %s got the system message %q, want support-model with %q", model, system, want)
	}
	if targets := res.GetContract().GetTargets(); len(targets) != 1 || targets[0].GetModel() != "support-model" {
		t.Errorf("support profile: contract targets %v, want the profile's", targets)
	}

	_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hello", Profile: "sales"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `profile "sales" is not configured (configured: support)`) {
		t.Errorf("unknown profile: %v, want INVALID_ARGUMENT naming it and the configured ones", err)
	}
}

// TestDefaultPrompt (issue 13.6): without prompts in the configuration the system message is
// DefaultSystemPrompt, followed by what the intent stage found.
func TestDefaultPrompt(t *testing.T) {
	const message = "Write a haiku about rain in 3 lines"
	h := start(t, nil, llmtest.Scenario{Name: "haiku", Match: message, Turns: []llmtest.Turn{text("Rain taps the window.")}})
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if !res.GetSuccess() {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	_, system := systemMessage(t, h, message)
	if want := orchestrator.DefaultSystemPrompt + "\n\nTask type: creative\n\nConstraints the answer must meet:\n- in 3 lines"; system != want {
		t.Errorf("system message %q, want %q", system, want)
	}
	if _, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hello", Profile: "docs"}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), `profile "docs" is not configured (no profiles are)`) {
		t.Errorf("a profile without any configured: %v, want INVALID_ARGUMENT", err)
	}
}

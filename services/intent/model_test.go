package intent_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"github.com/agentmesh/agentmesh/services/intent"
)

// modelClient is an intent service whose model is a scripted OpenAI-compatible server behind
// the real generation service.
func modelClient(t *testing.T, scenarios ...llmtest.Scenario) intentv1.IntentServiceClient {
	t.Helper()
	return modelClientWith(t, intent.Options{}, scenarios...)
}

// modelClientWith is modelClient with opts (its Model set to the scripted one).
func modelClientWith(t *testing.T, opts intent.Options, scenarios ...llmtest.Scenario) intentv1.IntentServiceClient {
	t.Helper()
	llm := llmtest.New(t, scenarios...)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	gen := generation.New(generation.Options{Providers: map[string]generation.Provider{
		"scripted": generation.NewOpenAI(generation.OpenAIOptions{Name: "scripted", BaseURL: llm.URL(),
			APIKey: "k", HTTPClient: &http.Client{Transport: tr}}),
	}})
	opts.Model = &ask.Model{
		Client: generationv1.NewGenerationServiceClient(grpctest.Serve(t, gen.Register)),
		Target: &typev1.Target{Provider: "scripted", Model: "intent-model"},
	}
	return client(t, opts)
}

// TestModelTimeoutFallsBackToRules: an intent model that does not answer within the caller's
// time leaves the rules time to parse the message, as the planning model does; the response
// says why and accounts the model's request.
func TestModelTimeoutFallsBackToRules(t *testing.T) {
	const message = "Write a poem about autumn in 4 lines"
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	c := modelClient(t, llmtest.Scenario{Name: "slow", Match: intent.ModelInputPrefix + message,
		Turns: []llmtest.Turn{{Hold: hold}}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	resp, err := c.Parse(ctx, &intentv1.ParseRequest{Message: message})
	if err != nil {
		t.Fatalf("Parse: %v; want the rules' parse", err)
	}
	if resp.GetSource() != intent.SourceRules || !strings.Contains(resp.GetFallbackReason(), "the intent model failed") {
		t.Errorf("source %q, fallback %q; want the rules, as the model failed", resp.GetSource(), resp.GetFallbackReason())
	}
	if resp.GetTaskType() != intentv1.TaskType_TASK_TYPE_CREATIVE || resp.GetGoal() != message {
		t.Errorf("task type %s, goal %q; want the rules' creative %q", resp.GetTaskType(), resp.GetGoal(), message)
	}
	if a := resp.GetAccounting(); len(a) != 1 || a[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED {
		t.Errorf("accounting %v, want the model's failed request", a)
	}
}

// TestModelGoalOfWhiteSpaceFallsBackToRules: a goal of white space only that the schema's
// pattern lets through (a no-break space is no \s) is no goal: the rules parse the message, as
// for any answer outside the schema, instead of a response without the goal it always has.
func TestModelGoalOfWhiteSpaceFallsBackToRules(t *testing.T) {
	const message = "Write a poem about autumn in 4 lines"
	c := modelClient(t, llmtest.Scenario{Name: "blank goal", Match: intent.ModelInputPrefix + message,
		Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{{Name: intent.ModelTool,
			Arguments: `{"goal": "\u00a0\u3000", "constraints": [], "task_type": "creative",
				"needs_clarification": false, "unsafe": false}`}}}}})
	resp, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: message})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetGoal() != message || resp.GetSource() != intent.SourceRules ||
		!strings.Contains(resp.GetFallbackReason(), "the goal is white space only") {
		t.Errorf("goal %q, source %q, fallback %q; want the rules' goal, saying the model's goal is blank",
			resp.GetGoal(), resp.GetSource(), resp.GetFallbackReason())
	}
	if len(resp.GetAccounting()) != 1 {
		t.Errorf("accounting %v, want the model's request", resp.GetAccounting())
	}
}

// TestModelGoalOverTheByteLimitFallsBackToRules: the schema bounds the goal in characters,
// the planning stage in bytes (the message's limit, 64 KiB): a goal of 40 000 "é", within
// the characters but 80 000 bytes, is an answer the rules stand in for, not a goal the
// planning stage refuses INVALID_ARGUMENT, which ended the run.
func TestModelGoalOverTheByteLimitFallsBackToRules(t *testing.T) {
	const message = "Write a poem about autumn in 4 lines"
	goal := strings.Repeat("é", 40_000)
	c := modelClient(t, llmtest.Scenario{Name: "long goal", Match: intent.ModelInputPrefix + message,
		Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{{Name: intent.ModelTool,
			Arguments: `{"goal": "` + goal + `", "constraints": [], "task_type": "creative",
				"needs_clarification": false, "unsafe": false}`}}}}})
	resp, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: message})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetGoal() != message || resp.GetSource() != intent.SourceRules ||
		!strings.Contains(resp.GetFallbackReason(), "the goal is 80000 bytes, the limit is 65536") {
		t.Errorf("goal of %d bytes, source %q, fallback %q; want the rules' goal, saying the "+
			"model's is too long", len(resp.GetGoal()), resp.GetSource(), resp.GetFallbackReason())
	}
}

// TestModelTimeoutWithoutCallerDeadline: a caller without a deadline does not let a model that
// never answers hold the parse: the model has Options.ModelTimeout (intent.DefaultModelTimeout
// when 0), past which the rules parse the message, and fallback_reason says so.
func TestModelTimeoutWithoutCallerDeadline(t *testing.T) {
	const message = "Write a poem about autumn in 4 lines"
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	c := modelClientWith(t, intent.Options{ModelTimeout: 50 * time.Millisecond},
		llmtest.Scenario{Name: "hung", Match: intent.ModelInputPrefix + message,
			Turns: []llmtest.Turn{{Hold: hold}}})
	resp, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: message})
	if err != nil {
		t.Fatalf("Parse: %v; want the rules' parse", err)
	}
	want := "the intent model failed: no answer within 50ms"
	if resp.GetSource() != intent.SourceRules || !strings.Contains(resp.GetFallbackReason(), want) {
		t.Errorf("source %q, fallback %q; want the rules, saying %q",
			resp.GetSource(), resp.GetFallbackReason(), want)
	}
	if resp.GetTaskType() != intentv1.TaskType_TASK_TYPE_CREATIVE || resp.GetGoal() != message {
		t.Errorf("task type %s, goal %q; want the rules' creative %q",
			resp.GetTaskType(), resp.GetGoal(), message)
	}
}

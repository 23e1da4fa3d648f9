package main

import (
	"strings"
	"testing"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// TestProgressShowsEachAttemptsDeltasApart: the deltas of a retried attempt and those of the
// retry go on lines of their own, the retry's named for its attempt, even with no llm_response
// between them (a watch that starts after it): the progress ran the two answers together.
func TestProgressShowsEachAttemptsDeltasApart(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b}
	delta := func(turn, attempt int32, content string) {
		p.event(&eventv1.RunEvent{Kind: &eventv1.RunEvent_LlmDelta{LlmDelta: &eventv1.LlmDelta{Turn: turn, Attempt: attempt, Content: content}}})
	}
	delta(1, 1, "Paris has ")
	delta(1, 1, "many sights: the")
	delta(1, 2, "The Louvre.")
	delta(2, 1, "Done.")
	p.endLine()
	want := "  model: Paris has many sights: the\n  model (attempt 2): The Louvre.\n  model: Done.\n"
	if got := b.String(); got != want {
		t.Errorf("progress\n%q\nwant\n%q", got, want)
	}
}

// TestProgressTellsAnAttemptThatGaveNoAnswer: an LLM attempt that the content filter stopped,
// or that answered nothing, is no answer (the run retries it), and an answer cut off at the
// output token limit is incomplete: the progress showed each as "✓ ... answered".
func TestProgressTellsAnAttemptThatGaveNoAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp *eventv1.LlmResponse
		want string
	}{
		{"filtered", &eventv1.LlmResponse{Attempt: 1, StopReason: "content_filter", Message: &typev1.Message{Content: "Here is how"}},
			"  ✗ scripted/gpt-test attempt 1: the answer was withheld or stopped by the provider's content filter\n"},
		{"empty", &eventv1.LlmResponse{Attempt: 2, StopReason: "stop", Message: &typev1.Message{}},
			"  ✗ scripted/gpt-test attempt 2: the answer was empty\n"},
		{"cut off", &eventv1.LlmResponse{Attempt: 1, StopReason: "length", Message: &typev1.Message{Content: "Paris has"}, Usage: &typev1.TokenUsage{Total: 12}},
			"  ✓ scripted/gpt-test answered (12 tokens), cut off at the output token limit\n"},
		{"failed", &eventv1.LlmResponse{Attempt: 3, Error: "rate limited"}, "  ✗ scripted/gpt-test attempt 3: rate limited\n"},
		{"answered", &eventv1.LlmResponse{Attempt: 1, StopReason: "stop", Message: &typev1.Message{Content: "42"}, Usage: &typev1.TokenUsage{Total: 9}},
			"  ✓ scripted/gpt-test answered (9 tokens)\n"},
	} {
		var b strings.Builder
		tc.resp.Provider, tc.resp.Model = "scripted", "gpt-test"
		(&progress{w: &b}).event(&eventv1.RunEvent{Kind: &eventv1.RunEvent_LlmResponse{LlmResponse: tc.resp}})
		if got := b.String(); got != tc.want {
			t.Errorf("%s: progress %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestProgressShowsNoEmptyModelLine: a delta with reasoning and no answer text (a reasoning
// model thinking, or an answer that is a tool call) shows nothing: the progress opened a
// "model:" line for it, and an answer without text left it empty.
func TestProgressShowsNoEmptyModelLine(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b}
	p.event(&eventv1.RunEvent{Kind: &eventv1.RunEvent_LlmDelta{LlmDelta: &eventv1.LlmDelta{Turn: 1, Attempt: 1, Reasoning: "I should call the calculator."}}})
	p.event(&eventv1.RunEvent{Kind: &eventv1.RunEvent_ToolStarted{ToolStarted: &eventv1.ToolStarted{Turn: 1, Call: &typev1.ToolCall{Name: "calculator"}}}})
	if got, want := b.String(), "  → calculator {}\n"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
}

// TestProgressTellsARefusedCall: a call the run refused without running it (tool_refused) is
// shown with its id, tool and reason, on one line: the progress showed nothing, so its user
// never learned why the call did not run.
func TestProgressTellsARefusedCall(t *testing.T) {
	var b strings.Builder
	(&progress{w: &b}).event(&eventv1.RunEvent{Kind: &eventv1.RunEvent_ToolRefused{ToolRefused: &eventv1.ToolRefused{
		Turn: 1, CallId: "call_7", ToolName: "calculator", Reason: "dropped: the run's budget of 1 tool calls\nis used up",
	}}})
	want := "  ✗ call call_7 (calculator) refused: dropped: the run's budget of 1 tool calls is used up\n"
	if got := b.String(); got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	// A long reason keeps its beginning and its end.
	b.Reset()
	reason := "the arguments are not valid JSON: " + strings.Repeat("x", 1000) + "; call it again"
	refused := &eventv1.ToolRefused{Turn: 1, CallId: "call_8", ToolName: "calculator", Reason: reason}
	(&progress{w: &b}).event(&eventv1.RunEvent{Kind: &eventv1.RunEvent_ToolRefused{ToolRefused: refused}})
	if got := b.String(); len(got) > 400 ||
		!strings.Contains(got, "refused: the arguments are not valid JSON: x") ||
		!strings.HasSuffix(got, "x; call it again\n") || !strings.Contains(got, "x … x") {
		t.Errorf("progress of a long reason %q, want its beginning and its end", got)
	}
}

// TestProgressKeepsTheEndOfAReason: the reason the rules made the plan, the reason the plan
// was revised, and the feedback of an approval decision keep the end of a long text, where the
// why stands, as a refused call's reason does: the progress cut each to its first 120
// characters.
func TestProgressKeepsTheEndOfAReason(t *testing.T) {
	long := "the planning model's plan was not valid: " + strings.Repeat("x", 1000) +
		"; step-3 uses tool nope, which is not registered"
	for _, ev := range []*eventv1.RunEvent{
		{Kind: &eventv1.RunEvent_PlanCreated{
			PlanCreated: &eventv1.PlanCreated{FallbackReason: long}}},
		{Kind: &eventv1.RunEvent_PlanRevised{
			PlanRevised: &eventv1.PlanRevised{Revision: 1, Reason: long}}},
		{Kind: &eventv1.RunEvent_ApprovalResolved{ApprovalResolved: &eventv1.ApprovalResolved{
			CallId: "call_1", Decision: "reject", Feedback: long}}},
	} {
		var b strings.Builder
		(&progress{w: &b}).event(ev)
		got := b.String()
		if len(got) > 400 ||
			!strings.Contains(got, ": the planning model's plan was not valid: x") ||
			!strings.HasSuffix(got, "x; step-3 uses tool nope, which is not registered\n") {
			t.Errorf("progress of %T with a long reason %q, want its beginning and its end",
				ev.GetKind(), got)
		}
	}
}

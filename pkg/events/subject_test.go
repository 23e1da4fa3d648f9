package events

import (
	"testing"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

func TestKindAndSubject(t *testing.T) {
	tests := []struct {
		ev   *eventv1.RunEvent
		want string
	}{
		{nil, ""},
		{&eventv1.RunEvent{}, ""},
		{&eventv1.RunEvent{Kind: &eventv1.RunEvent_RunStarted{RunStarted: &eventv1.RunStarted{}}}, "run_started"},
		{&eventv1.RunEvent{Kind: &eventv1.RunEvent_LlmDelta{LlmDelta: &eventv1.LlmDelta{}}}, "llm_delta"},
		{&eventv1.RunEvent{Kind: &eventv1.RunEvent_ContextGuard{ContextGuard: &eventv1.ContextGuardEvaluated{}}}, "context_guard"},
		{&eventv1.RunEvent{Kind: &eventv1.RunEvent_RunFinished{RunFinished: &eventv1.RunFinished{}}}, "run_finished"},
		{&eventv1.RunEvent{Kind: &eventv1.RunEvent_RunResumed{RunResumed: &eventv1.RunResumed{}}}, "run_resumed"},
	}
	for _, tt := range tests {
		if got := Kind(tt.ev); got != tt.want {
			t.Errorf("Kind(%v) = %q, want %q", tt.ev, got, tt.want)
		}
	}
	for kind, want := range map[string]string{"llm_delta": "agentmesh.run.run-1.llm_delta", "run_resumed": "agentmesh.run.run-1.run_resumed"} {
		if got := Subject("run-1", kind); got != want {
			t.Errorf("Subject(run-1, %s) = %q, want %q", kind, got, want)
		}
	}
}

func TestHeaderCarrier(t *testing.T) {
	c := HeaderCarrier{}
	c.Set("traceparent", "a")
	c["Tracestate"] = []string{"b"}
	if got := c.Get("traceparent"); got != "a" {
		t.Errorf("Get(traceparent) = %q, want a", got)
	}
	if got := c.Get("tracestate"); got != "b" {
		t.Errorf("Get(tracestate) = %q, want b (case-insensitive fallback)", got)
	}
	if got := c.Get("missing"); got != "" {
		t.Errorf("Get(missing) = %q, want empty", got)
	}
	if got := len(c.Keys()); got != 2 {
		t.Errorf("Keys() has %d entries, want 2", got)
	}
}

package events

import (
	"strings"
	"testing"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
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

func TestValidRunID(t *testing.T) {
	tests := []struct {
		id      string
		wantErr string
	}{
		{"run-1", ""},
		{"Run_2024-01-01_abcDEF", ""},
		{strings.Repeat("a", MaxRunIDLength), ""},
		{"", "must not be empty"},
		{strings.Repeat("a", MaxRunIDLength+1), "at most 128"},
		{"run.1", `contains '.'`},
		{"run*", `contains '*'`},
		{"run>", `contains '>'`},
		{"run 1", `contains ' '`},
		{"rün", `contains 'ü'`},
	}
	for _, tt := range tests {
		err := ValidRunID(tt.id)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("ValidRunID(%q) = %v, want nil", tt.id, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ValidRunID(%q) = %v, want error containing %q", tt.id, err, tt.wantErr)
			continue
		}
		if se := stageerr.As(err); se == nil || se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT {
			t.Errorf("ValidRunID(%q) error %v is not INVALID_INPUT", tt.id, err)
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

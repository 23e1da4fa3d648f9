package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHistoryMessageShape: a history message sets only the fields of its role (tool_calls and
// reasoning_state an assistant message's, tool_call_id a tool message's), each tool call names
// its tool, and a call's id, as the tool_call_id that answers it, is at most 512 bytes (the
// action stage's limit of a call id). Each of these started a run: the fields a role does not
// take were dropped without a word, a call without a name went to the provider, which refuses
// it (HTTP 400) mid-run, and an id of a megabyte filled the run's context window.
func TestHistoryMessageShape(t *testing.T) {
	h := start(t, nil)
	long := strings.Repeat("c", 513)
	user := func(m *typev1.Message) *typev1.Message { m.Role = typev1.Role_ROLE_USER; return m }
	tests := []struct {
		name    string
		history []*typev1.Message
		want    string
	}{
		{"tool calls of a user message", []*typev1.Message{
			user(&typev1.Message{Content: "x", ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "calculator"}}}),
		}, "history[0].tool_calls: only an assistant message has tool calls, this one is ROLE_USER"},
		{"tool calls of a tool message", []*typev1.Message{
			{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: "c1", Name: "calculator"}}},
			{Role: typev1.Role_ROLE_TOOL, ToolCallId: "c1", Content: "2", ToolCalls: []*typev1.ToolCall{{Id: "c2", Name: "calculator"}}},
		}, "history[1].tool_calls: only an assistant message has tool calls, this one is ROLE_TOOL"},
		{"tool_call_id of a user message", []*typev1.Message{
			user(&typev1.Message{Content: "x", ToolCallId: "c1"}),
		}, "history[0].tool_call_id: only a tool message answers a call, this one is ROLE_USER"},
		{"tool_call_id of an assistant message", []*typev1.Message{
			{Role: typev1.Role_ROLE_ASSISTANT, Content: "x", ToolCallId: "c1"},
		}, "history[0].tool_call_id: only a tool message answers a call, this one is ROLE_ASSISTANT"},
		{"reasoning_state of a user message", []*typev1.Message{
			user(&typev1.Message{Content: "x", ReasoningState: []byte("signed")}),
		}, "history[0].reasoning_state: only an assistant message has one, this one is ROLE_USER"},
		{"tool call without a name", []*typev1.Message{
			{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: "c1"}}},
		}, "history[0].tool_calls[0].name must not be empty"},
		{"tool call id over 512 bytes", []*typev1.Message{
			{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: long, Name: "calculator"}}},
		}, "history[0].tool_calls[0].id: at most 512 bytes, got 513"},
		{"tool_call_id over 512 bytes", []*typev1.Message{
			{Role: typev1.Role_ROLE_TOOL, ToolCallId: long, Content: "2"},
		}, "history[0].tool_call_id: at most 512 bytes, got 513"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi", History: tc.history})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
				t.Errorf("Run: %v, want INVALID_ARGUMENT mentioning %q", err, tc.want)
			}
			want := strings.Replace(tc.want, "history", "message_history", 1)
			_, err = h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", MessageHistory: tc.history})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), want) {
				t.Errorf("Decide: %v, want INVALID_ARGUMENT mentioning %q", err, want)
			}
		})
	}
	// A well-formed exchange is taken: the call, its result, and the assistant's answer.
	res := h.run(t, &agentv1.RunRequest{Message: "what is 2+2", History: []*typev1.Message{
		{Role: typev1.Role_ROLE_USER, Content: "what is 1+1"},
		{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: strings.Repeat("c", 512), Name: "calculator"}}},
		{Role: typev1.Role_ROLE_TOOL, ToolCallId: strings.Repeat("c", 512), Name: "calculator", Content: "2"},
		{Role: typev1.Role_ROLE_ASSISTANT, Content: "2", ReasoningState: []byte("signed")},
	}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Errorf("well-formed history: %s %s", res.GetOutcome(), res.GetExitReason())
	}
}

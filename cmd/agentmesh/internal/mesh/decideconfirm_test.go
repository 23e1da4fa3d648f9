package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestDecidePendingConfirmationShape: the pending action a "yes" confirms is a decision's
// (REQUEST_CONFIRMATION's pending_action): it names no run, and each of its calls has an id of
// at most 512 bytes that no other call of it has. A run's pending action (one naming its run)
// was confirmed as a decision's, its calls handed back to be made while the run went on waiting
// for ResolveApproval; calls without ids, or two of one id, were handed back as they were.
func TestDecidePendingConfirmationShape(t *testing.T) {
	h := start(t, nil)
	calc := func(id string) *typev1.ToolCall {
		return &typev1.ToolCall{Id: id, Name: "calculator", Arguments: mustStruct(t, map[string]any{"expression": "1+1"})}
	}
	tests := []struct {
		name    string
		pending *typev1.PendingAction
		want    string
	}{
		{"a run's pending action", &typev1.PendingAction{RunId: "run-1", ToolCalls: []*typev1.ToolCall{calc("c1")}},
			"pending_confirmation.run_id: Decide confirms a decision's pending action, which names no run; answer a paused run's calls with ResolveApproval"},
		{"a call without an id", &typev1.PendingAction{ToolCalls: []*typev1.ToolCall{calc("c1"), calc("")}},
			"pending_confirmation.tool_calls[1].id must not be empty"},
		{"two calls of one id", &typev1.PendingAction{ToolCalls: []*typev1.ToolCall{calc("c1"), calc("c1")}},
			`pending_confirmation.tool_calls[1].id "c1" repeats tool_calls[0]'s`},
		{"a call id over 512 bytes", &typev1.PendingAction{ToolCalls: []*typev1.ToolCall{calc(strings.Repeat("c", 513))}},
			"pending_confirmation.tool_calls[0].id: at most 512 bytes, got 513"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, message := range []string{"yes", "no", "what is 2+2"} {
				_, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: message, PendingConfirmation: tc.pending})
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
					t.Errorf("%q: %v, want INVALID_ARGUMENT mentioning %q", message, err, tc.want)
				}
			}
		})
	}
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "yes", PendingConfirmation: &typev1.PendingAction{
		ToolCalls: []*typev1.ToolCall{calc("c1"), calc(strings.Repeat("c", 512))}, Reason: "a requested tool needs your confirmation"}})
	if err != nil || d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_INVOKE_TOOL || len(d.GetToolCalls()) != 2 {
		t.Errorf("confirming a decision's pending action: %v %v, want INVOKE_TOOL of its two calls", d, err)
	}
}

package orchestrator

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// checkHistoryShape refuses a history (field names it) whose message has a role the proto
// does not name, sets a field its role does not take (tool_calls or reasoning_state of a
// message not the assistant's, tool_call_id of one not a tool result), has a tool call that
// names no tool, or a call id or tool_call_id over MaxCallIDBytes. The stages would drop the
// fields of another role without a word, a provider refuses a call without a name (HTTP 400)
// once the run has begun, and no call the action stage runs has a longer id. It runs before
// checkHistoryCalls, whose errors quote the ids.
func checkHistoryShape(field string, history []*typev1.Message) error {
	for i, m := range history {
		role := m.GetRole()
		switch _, known := typev1.Role_name[int32(role)]; {
		case !known || role == typev1.Role_ROLE_UNSPECIFIED:
			return stageerr.Invalid("%s[%d].role must be system, user, assistant or tool, got %d", field, i, role)
		case len(m.GetToolCalls()) > 0 && role != typev1.Role_ROLE_ASSISTANT:
			return stageerr.Invalid("%s[%d].tool_calls: only an assistant message has tool calls, this one is %s", field, i, role)
		case len(m.GetReasoningState()) > 0 && role != typev1.Role_ROLE_ASSISTANT:
			return stageerr.Invalid("%s[%d].reasoning_state: only an assistant message has one, this one is %s", field, i, role)
		case m.GetToolCallId() != "" && role != typev1.Role_ROLE_TOOL:
			return stageerr.Invalid("%s[%d].tool_call_id: only a tool message answers a call, this one is %s", field, i, role)
		case len(m.GetToolCallId()) > MaxCallIDBytes:
			return stageerr.Invalid("%s[%d].tool_call_id: at most %d bytes, got %d", field, i, MaxCallIDBytes, len(m.GetToolCallId()))
		}
		for j, c := range m.GetToolCalls() {
			switch {
			case c.GetName() == "":
				return stageerr.Invalid("%s[%d].tool_calls[%d].name must not be empty", field, i, j)
			case len(c.GetId()) > MaxCallIDBytes:
				return stageerr.Invalid("%s[%d].tool_calls[%d].id: at most %d bytes, got %d", field, i, j, MaxCallIDBytes, len(c.GetId()))
			}
		}
	}
	return nil
}

package orchestrator

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// checkHistoryCalls refuses a history (field names it) whose tool calls and results do not
// pair by id: an assistant message's call without an id or with the id of another of its
// calls, and a tool result without a tool_call_id or answering no call of an earlier
// assistant message. Providers refuse such a conversation (HTTP 400), and the context stage
// would drop the call or result without a word. A call that no result answers is taken: a
// conversation may end while its calls run.
func checkHistoryCalls(field string, history []*typev1.Message) error {
	asked := map[string]bool{} // the ids of the calls of the messages so far
	for i, m := range history {
		switch m.GetRole() {
		case typev1.Role_ROLE_ASSISTANT:
			own := map[string]int{} // the index of each of the message's calls by its id
			for j, c := range m.GetToolCalls() {
				id := c.GetId()
				if id == "" {
					return stageerr.Invalid("%s[%d].tool_calls[%d].id must not be empty", field, i, j)
				}
				if k, dup := own[id]; dup {
					return stageerr.Invalid("%s[%d].tool_calls[%d].id %q repeats tool_calls[%d]'s",
						field, i, j, id, k)
				}
				own[id] = j
				asked[id] = true
			}
		case typev1.Role_ROLE_TOOL:
			switch id := m.GetToolCallId(); {
			case id == "":
				return stageerr.Invalid("%s[%d].tool_call_id must not be empty", field, i)
			case !asked[id]:
				return stageerr.Invalid(
					"%s[%d].tool_call_id %q answers no tool call of an earlier assistant message",
					field, i, id)
			}
		}
	}
	return nil
}

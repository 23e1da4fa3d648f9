package orchestrator

import (
	"fmt"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// checkHistoryCalls refuses a history (field names it) whose tool calls and results do not
// pair by id: an assistant message's call without an id or with the id of another call of
// the history, and a tool result without a tool_call_id, answering no call of an earlier
// assistant message or answering a call another result answers. Providers refuse such a
// conversation (HTTP 400), a result pairs with its call by id alone, and the context stage
// would drop the call or result without a word. A call that no result answers is taken: a
// conversation may end while its calls run.
func checkHistoryCalls(field string, history []*typev1.Message) error {
	asked := map[string]string{}    // the field of each call so far by its id
	answered := map[string]string{} // the field of each result so far by the id it answers
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
				if earlier, dup := asked[id]; dup {
					return stageerr.Invalid("%s[%d].tool_calls[%d].id %q duplicates %s",
						field, i, j, id, earlier)
				}
				own[id] = j
				asked[id] = fmt.Sprintf("%s[%d].tool_calls[%d].id", field, i, j)
			}
		case typev1.Role_ROLE_TOOL:
			id := m.GetToolCallId()
			switch _, known := asked[id]; {
			case id == "":
				return stageerr.Invalid("%s[%d].tool_call_id must not be empty", field, i)
			case !known:
				return stageerr.Invalid(
					"%s[%d].tool_call_id %q answers no tool call of an earlier assistant message",
					field, i, id)
			}
			if earlier, dup := answered[id]; dup {
				return stageerr.Invalid("%s[%d].tool_call_id %q duplicates %s", field, i, id, earlier)
			}
			answered[id] = fmt.Sprintf("%s[%d].tool_call_id", field, i)
		}
	}
	return nil
}

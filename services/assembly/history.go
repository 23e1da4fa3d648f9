package assembly

import (
	"slices"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"google.golang.org/protobuf/proto"
)

// unit is a run of history messages kept or dropped together: one message, or an assistant
// message with tool calls followed by the tool results answering them.
type unit struct {
	messages []*typev1.Message
	tokens   int64
}

// history is a request's history split for assembly.
type history struct {
	// system are the leading system messages, always kept.
	system []*typev1.Message
	// units are the remaining messages, oldest first, without orphan tool results.
	units []*unit
	// user is the index in units of the latest user message when an older unit than the
	// newest, else -1: the request the newest history serves, kept with it.
	user int
}

// splitHistory separates the leading system messages and groups the rest into units. A tool
// message joins the unit of the assistant message right before it (only other tool results
// may sit in between) when that message requested its tool_call_id, which is not empty;
// otherwise it is an orphan and never kept. A call that no result answers there is left out of its message (a
// copy), as are a call without an id and a second call of one id, and a message left with
// nothing to say goes: providers refuse a call without its result, a call or result without
// an id and two calls of one id (HTTP 400), and a history from the API's caller may hold one.
func splitHistory(msgs []*typev1.Message, counter tokens.Counter) *history {
	h := &history{}
	i := 0
	for i < len(msgs) && msgs[i].GetRole() == typev1.Role_ROLE_SYSTEM {
		i++
	}
	h.system = msgs[:i]
	rest := msgs[i:]

	var open *unit            // the unit of the last assistant message with tool calls, while results follow
	var calls map[string]bool // its calls' ids, true once a result answers the call
	for _, m := range rest {
		if m.GetRole() == typev1.Role_ROLE_TOOL {
			id := m.GetToolCallId()
			if answered, asked := calls[id]; open != nil && id != "" && asked && !answered {
				calls[id] = true
				open.messages = append(open.messages, m)
				open.tokens += counter.Message(m)
			}
			continue
		}
		h.closeCalls(open, calls, counter)
		u := &unit{messages: []*typev1.Message{m}, tokens: counter.Message(m)}
		h.units = append(h.units, u)
		open, calls = nil, nil
		if m.GetRole() == typev1.Role_ROLE_ASSISTANT && len(m.GetToolCalls()) > 0 {
			open, calls = u, make(map[string]bool, len(m.GetToolCalls()))
			for _, c := range m.GetToolCalls() {
				calls[c.GetId()] = false
			}
		}
	}
	h.closeCalls(open, calls, counter)
	h.user = -1
	for i := len(h.units) - 1; i >= 0; i-- {
		if h.units[i].messages[0].GetRole() == typev1.Role_ROLE_USER {
			if i < len(h.units)-1 {
				h.user = i
			}
			break
		}
	}
	return h
}

// closeCalls ends the unit u of an assistant message whose calls are answered as calls says
// (which it uses up): its message loses the calls without a result, and every call after the
// first of an id, which the result answers once; u goes when nothing is left of it.
func (h *history) closeCalls(u *unit, calls map[string]bool, counter tokens.Counter) {
	if u == nil {
		return
	}
	m := u.messages[0]
	kept := slices.DeleteFunc(slices.Clone(m.GetToolCalls()), func(c *typev1.ToolCall) bool {
		answered := calls[c.GetId()]
		calls[c.GetId()] = false // a later call of the id goes
		return !answered
	})
	if len(kept) == len(m.GetToolCalls()) {
		return
	}
	if len(kept) == 0 && m.GetContent() == "" && m.GetReasoning() == "" {
		h.units = slices.DeleteFunc(h.units, func(v *unit) bool { return v == u })
		return
	}
	cut := proto.CloneOf(m)
	cut.ToolCalls = kept
	u.tokens += counter.Message(cut) - counter.Message(m)
	u.messages[0] = cut
}

// minimum returns the tokens of the units always kept: the newest and the latest user
// message's.
func (h *history) minimum() int64 {
	var n int64
	if len(h.units) > 0 {
		n += h.units[len(h.units)-1].tokens
	}
	if h.user >= 0 {
		n += h.units[h.user].tokens
	}
	return n
}

// fit returns the messages of the units always kept (minimum, already accounted for by the
// caller) and of as many units before the newest, newest first, as fit within budget tokens;
// it stops at the first unit that does not fit, so the kept history is an unbroken tail of
// the conversation, after the latest user message when the tail does not reach it. Messages
// are returned oldest first, with the number of messages of the units left out for the
// budget (orphan tool results, never kept, are not among them).
func (h *history) fit(budget int64) (kept []*typev1.Message, trimmed int) {
	if len(h.units) == 0 {
		return nil, 0
	}
	first := len(h.units) - 1
	for first > 0 {
		if prev := h.units[first-1]; first-1 != h.user {
			if prev.tokens > budget {
				break
			}
			budget -= prev.tokens
		}
		first--
	}
	for i, u := range h.units[:first] {
		if i != h.user {
			trimmed += len(u.messages)
		}
	}
	if h.user >= 0 && h.user < first {
		kept = append(kept, h.units[h.user].messages...)
	}
	for _, u := range h.units[first:] {
		kept = append(kept, u.messages...)
	}
	return kept, trimmed
}

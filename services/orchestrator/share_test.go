package orchestrator

import (
	"fmt"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
)

// TestShareHistory: the assembled messages equal to the conversation's in their place (the
// leading ones, matched from the front, and the newest, from the back) become the
// conversation's own; those the stage added or changed stay its own.
func TestShareHistory(t *testing.T) {
	msg := func(role typev1.Role, content string) *typev1.Message {
		return &typev1.Message{Role: role, Content: content}
	}
	system := msg(typev1.Role_ROLE_SYSTEM, "You are an agent.")
	conversation := []*typev1.Message{system}
	for i := range 6 {
		role := typev1.Role_ROLE_USER
		if i%2 == 1 {
			role = typev1.Role_ROLE_ASSISTANT
		}
		conversation = append(conversation, msg(role, fmt.Sprintf("message %d", i)))
	}
	conversation[4].ToolCalls = []*typev1.ToolCall{{Id: "c1", Name: "calculator"}}
	decoded := func(ms ...*typev1.Message) []*typev1.Message { // as the context stage's answer arrives: copies
		out := make([]*typev1.Message, len(ms))
		for i, m := range ms {
			out[i] = proto.CloneOf(m)
		}
		return out
	}
	step := msg(typev1.Role_ROLE_SYSTEM, "Current step: multiply.")
	memory := msg(typev1.Role_ROLE_SYSTEM, "Recalled: 6 times 7 is 42.")
	changed := msg(typev1.Role_ROLE_SYSTEM, "You are an agent. Task type: math.")
	noCalls := proto.CloneOf(conversation[4])
	noCalls.ToolCalls = nil
	table := []struct {
		name      string
		assembled []*typev1.Message
		shared    []int // for each assembled message, the conversation's it must be, or -1
	}{
		{"the whole conversation", decoded(conversation...), []int{0, 1, 2, 3, 4, 5, 6}},
		{"step and memories between", decoded(append([]*typev1.Message{system, step, memory}, conversation[1:]...)...), []int{0, -1, -1, 1, 2, 3, 4, 5, 6}},
		{"older messages dropped", decoded(system, memory, conversation[5], conversation[6]), []int{0, -1, 5, 6}},
		{"a changed system prompt", decoded(append([]*typev1.Message{changed}, conversation[1:]...)...), []int{-1, 1, 2, 3, 4, 5, 6}},
		{"a message that differs in its tool calls", decoded(system, conversation[3], noCalls, conversation[5], conversation[6]), []int{0, -1, -1, 5, 6}},
		{"nothing in common", decoded(step, memory), []int{-1, -1}},
		{"an empty assembly", nil, nil},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]*typev1.Message(nil), tc.assembled...)
			shareHistory(tc.assembled, conversation)
			for i, want := range tc.shared {
				switch got := tc.assembled[i]; {
				case want >= 0 && got != conversation[want]:
					t.Errorf("message %d (%q) is not the conversation's message %d", i, got.GetContent(), want)
				case want < 0 && got != before[i]:
					t.Errorf("message %d (%q) was replaced, but the conversation has no equal one in its place", i, got.GetContent())
				}
			}
		})
	}
}

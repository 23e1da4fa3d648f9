package generation

import (
	"fmt"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

func TestThinkingMemoryIsBounded(t *testing.T) {
	m := newThinkingMemory()
	block := []thinkingBlock{{Type: "redacted_thinking", Data: "x"}}
	for i := range thinkingMemorySize + 1 {
		m.put(fmt.Sprintf("toolu_%d", i), block)
	}
	if m.get("toolu_0") != nil {
		t.Error("the oldest entry was not evicted")
	}
	if m.get("toolu_1") == nil || m.get(fmt.Sprintf("toolu_%d", thinkingMemorySize)) == nil {
		t.Error("recent entries were evicted")
	}
	if m.order.Len() != thinkingMemorySize || len(m.items) != thinkingMemorySize {
		t.Errorf("size %d/%d, want %d", m.order.Len(), len(m.items), thinkingMemorySize)
	}
	m.put("toolu_1", block) // replacing keeps one entry
	if m.order.Len() != thinkingMemorySize {
		t.Errorf("replacing an entry grew the memory to %d", m.order.Len())
	}
}

func TestThinkingMemoryRemembersOnlyAnswersWithToolCalls(t *testing.T) {
	m := newThinkingMemory()
	text := "hmm"
	blocks := []thinkingBlock{{Type: "thinking", Thinking: &text, Signature: "sig"}, {Type: "redacted_thinking", Data: "opaque"}}
	m.remember(blocks, nil)
	m.remember(nil, []ToolCall{{ID: "toolu_x"}})
	if len(m.items) != 0 {
		t.Fatalf("remembered %v", m.items)
	}
	m.remember(blocks, []ToolCall{{ID: "toolu_a"}, {ID: "toolu_b"}})
	if got := m.get("toolu_a"); len(got) != 2 || *got[0].Thinking != "hmm" || got[1].Data != "opaque" || m.get("toolu_b") != nil || m.get("") != nil {
		t.Errorf("blocks = %+v", got)
	}
}

func TestThinkingStateRoundTrip(t *testing.T) {
	text := "hmm"
	blocks := []thinkingBlock{{Type: "thinking", Thinking: &text, Signature: "sig"}, {Type: "redacted_thinking", Data: "opaque"}}
	state := encodeThinking(blocks)
	if want := `{"anthropic_thinking":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"opaque"}]}`; string(state) != want {
		t.Fatalf("state = %s, want %s", state, want)
	}
	if got := decodeThinking(state); len(got) != 2 || *got[0].Thinking != "hmm" || got[0].Signature != "sig" || got[1].Data != "opaque" {
		t.Errorf("decoded %+v", got)
	}
	if encodeThinking(nil) != nil {
		t.Error("an answer without thinking blocks has state")
	}
}

func TestThinkingStateOfOthersIsIgnored(t *testing.T) {
	for name, state := range map[string]string{
		"empty":                            ``,
		"not JSON":                         "\x00\x01opaque",
		"another provider's":               `{"encrypted_reasoning":"abc"}`,
		"no blocks":                        `{"anthropic_thinking":[]}`,
		"thinking block without signature": `{"anthropic_thinking":[{"type":"thinking","thinking":"x"}]}`,
		"redacted block without data":      `{"anthropic_thinking":[{"type":"redacted_thinking"}]}`,
		"not a thinking block":             `{"anthropic_thinking":[{"type":"tool_use","id":"x"}]}`,
	} {
		if got := decodeThinking([]byte(state)); got != nil {
			t.Errorf("%s: decoded %+v, want nil", name, got)
		}
	}
}

func TestThinkingReplayPrefersTheMessageState(t *testing.T) {
	m := newThinkingMemory()
	cached, carried := "from the memory", "from the state"
	m.put("toolu_a", []thinkingBlock{{Type: "thinking", Thinking: &cached, Signature: "s1"}})
	call := []*typev1.ToolCall{{Id: "toolu_a", Name: "f"}}
	state := encodeThinking([]thinkingBlock{{Type: "thinking", Thinking: &carried, Signature: "s2"}})
	for _, tc := range []struct {
		name string
		msg  *typev1.Message
		want string // thinking text replayed; "" for none
	}{
		{name: "state wins", msg: &typev1.Message{ToolCalls: call, ReasoningState: state}, want: carried},
		{name: "memory without state", msg: &typev1.Message{ToolCalls: call}, want: cached},
		{name: "memory when the state is not ours", msg: &typev1.Message{ToolCalls: call, ReasoningState: []byte("x")}, want: cached},
		{name: "state without tool calls", msg: &typev1.Message{Content: "ok", ReasoningState: state}, want: carried},
		{name: "nothing", msg: &typev1.Message{Content: "ok"}},
	} {
		got := m.replay(tc.msg)
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%s: replayed %+v", tc.name, got)
		case tc.want != "" && (len(got) != 1 || *got[0].Thinking != tc.want):
			t.Errorf("%s: replayed %+v, want %q", tc.name, got, tc.want)
		}
	}
}

package generation

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestThinkingMemoryIsBounded(t *testing.T) {
	m := newThinkingMemory()
	block := []json.RawMessage{json.RawMessage(`{"type":"redacted_thinking","data":"x"}`)}
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
	got := m.get("toolu_a")
	if len(got) != 2 || string(got[0]) != `{"type":"thinking","thinking":"hmm","signature":"sig"}` ||
		string(got[1]) != `{"type":"redacted_thinking","data":"opaque"}` || m.get("toolu_b") != nil || m.get("") != nil {
		t.Errorf("blocks = %s", got)
	}
}

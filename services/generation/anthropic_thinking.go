package generation

import (
	"container/list"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// MinThinkingBudget is the smallest extended thinking budget, in tokens, the Anthropic API
// accepts.
const MinThinkingBudget = 1024

// thinkingBudgets maps named reasoning efforts to extended thinking budgets in tokens.
var thinkingBudgets = map[string]int64{
	"minimal": MinThinkingBudget,
	"low":     MinThinkingBudget,
	"medium":  4096,
	"high":    16384,
	"max":     32768,
}

// thinkingFor maps Sampling.reasoning_effort to Anthropic's extended thinking
// (thinking.budget_tokens): "minimal" and "low" 1024 tokens (the API's minimum), "medium"
// 4096, "high" 16384, "max" 32768; a number is taken as the budget itself; "", "none", "off"
// and "disabled" leave thinking off (nil). The budget counts against max_tokens, so it is
// capped at max_tokens-1; a budget that ends up under 1024 is INVALID_INPUT, as is an
// unknown effort.
func thinkingFor(effort string, maxTokens int64) (*thinkingConfig, error) {
	e := strings.ToLower(strings.TrimSpace(effort))
	switch e {
	case "", "none", "off", "disabled":
		return nil, nil
	}
	budget, ok := thinkingBudgets[e]
	if !ok {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil || n <= 0 {
			return nil, stageerr.Invalid("reasoning_effort %q is not minimal, low, medium, high, max or a token budget", effort)
		}
		budget = n
	}
	budget = min(budget, maxTokens-1)
	if budget < MinThinkingBudget {
		return nil, stageerr.Invalid("reasoning_effort %q needs a thinking budget of at least %d tokens below max_tokens, but max_output_tokens is %d",
			effort, MinThinkingBudget, maxTokens)
	}
	return &thinkingConfig{Type: "enabled", BudgetTokens: budget}, nil
}

// thinkingBlock is a thinking or redacted_thinking block as the API wants it back.
type thinkingBlock struct {
	Type      string  `json:"type"`
	Thinking  *string `json:"thinking,omitempty"`
	Signature string  `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`
}

// valid reports whether the block can be sent back: a thinking block with its text and
// signature, or a redacted_thinking block with its data.
func (b thinkingBlock) valid() bool {
	switch b.Type {
	case "thinking":
		return b.Thinking != nil && b.Signature != ""
	case "redacted_thinking":
		return b.Data != ""
	}
	return false
}

// thinkingState is the reasoning_state this provider writes: the answer's thinking and
// redacted_thinking blocks, in answer order, as the API wants them back. The field name
// marks the state as Anthropic's, so the state of other providers is not mistaken for it.
type thinkingState struct {
	Blocks []thinkingBlock `json:"anthropic_thinking"`
}

// encodeThinking serialises an answer's thinking blocks as its reasoning_state; nil when
// there are none.
func encodeThinking(blocks []thinkingBlock) []byte {
	if len(blocks) == 0 {
		return nil
	}
	data, err := json.Marshal(thinkingState{Blocks: blocks})
	if err != nil {
		return nil
	}
	return data
}

// decodeThinking reads the thinking blocks back from a reasoning_state; state this provider
// did not write, or with a block that cannot be sent back, yields nil.
func decodeThinking(state []byte) []thinkingBlock {
	if len(state) == 0 {
		return nil
	}
	var st thinkingState
	if err := json.Unmarshal(state, &st); err != nil || len(st.Blocks) == 0 {
		return nil
	}
	for _, b := range st.Blocks {
		if !b.valid() {
			return nil
		}
	}
	return st.Blocks
}

// thinkingMemorySize bounds the thinking blocks remembered.
const thinkingMemorySize = 4096

// thinkingMemory is the fallback for callers that do not send reasoning_state back: it
// remembers the signed thinking blocks of answers with tool calls, keyed by the id of the
// answer's first tool call, so that a continuation after those tool calls (which the API
// rejects without the blocks while thinking is enabled) can replay them. It lives in the
// process: after a restart only reasoning_state carries the blocks.
type thinkingMemory struct {
	mu    sync.Mutex
	order *list.List // front = newest; values are string keys
	items map[string][]thinkingBlock
}

func newThinkingMemory() *thinkingMemory {
	return &thinkingMemory{order: list.New(), items: map[string][]thinkingBlock{}}
}

// put remembers blocks under the call id, evicting the oldest entry when full.
func (m *thinkingMemory) put(callID string, blocks []thinkingBlock) {
	if callID == "" || len(blocks) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.items[callID]; !ok {
		m.order.PushFront(callID)
	}
	m.items[callID] = blocks
	for m.order.Len() > thinkingMemorySize {
		oldest := m.order.Back()
		m.order.Remove(oldest)
		delete(m.items, oldest.Value.(string))
	}
}

// get returns the blocks remembered under the call id, or nil.
func (m *thinkingMemory) get(callID string) []thinkingBlock {
	if callID == "" {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items[callID]
}

// remember stores the answer's thinking blocks when it has tool calls; a nil memory (a
// broken-off answer's) remembers nothing.
func (m *thinkingMemory) remember(blocks []thinkingBlock, calls []ToolCall) {
	if m == nil || len(blocks) == 0 || len(calls) == 0 {
		return
	}
	m.put(calls[0].ID, blocks)
}

// replay returns the thinking blocks to send back at the start of an assistant message: the
// ones its reasoning_state carries, else the ones remembered under its first tool call.
func (m *thinkingMemory) replay(msg *typev1.Message) []thinkingBlock {
	if blocks := decodeThinking(msg.GetReasoningState()); blocks != nil {
		return blocks
	}
	if calls := msg.GetToolCalls(); len(calls) > 0 {
		return m.get(calls[0].GetId())
	}
	return nil
}

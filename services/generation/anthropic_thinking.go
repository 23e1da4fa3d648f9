package generation

import (
	"container/list"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

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

// thinkingMemorySize bounds the thinking blocks remembered.
const thinkingMemorySize = 4096

// thinkingMemory remembers the signed thinking blocks of answers with tool calls, keyed by
// the id of the answer's first tool call. The canonical message keeps only the reasoning
// text, but the API requires the signed blocks when the conversation continues after those
// tool calls with thinking enabled; the provider replays them from here. After a restart the
// blocks are gone and the assistant message is sent without them.
type thinkingMemory struct {
	mu    sync.Mutex
	order *list.List // front = newest; values are string keys
	items map[string][]json.RawMessage
}

func newThinkingMemory() *thinkingMemory {
	return &thinkingMemory{order: list.New(), items: map[string][]json.RawMessage{}}
}

// put remembers blocks under the call id, evicting the oldest entry when full.
func (m *thinkingMemory) put(callID string, blocks []json.RawMessage) {
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
func (m *thinkingMemory) get(callID string) []json.RawMessage {
	if callID == "" {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items[callID]
}

// thinkingBlock is a thinking or redacted_thinking block as the API wants it back.
type thinkingBlock struct {
	Type      string  `json:"type"`
	Thinking  *string `json:"thinking,omitempty"`
	Signature string  `json:"signature,omitempty"`
	Data      string  `json:"data,omitempty"`
}

// remember stores the answer's thinking blocks when it has tool calls.
func (m *thinkingMemory) remember(blocks []thinkingBlock, calls []ToolCall) {
	if len(blocks) == 0 || len(calls) == 0 {
		return
	}
	raw := make([]json.RawMessage, 0, len(blocks))
	for _, b := range blocks {
		data, err := json.Marshal(b)
		if err != nil {
			return
		}
		raw = append(raw, data)
	}
	m.put(calls[0].ID, raw)
}

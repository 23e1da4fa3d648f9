package generation

import (
	"encoding/json"
	"slices"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/structjson"
)

// messagesRequest is the body of POST /messages.
type messagesRequest struct {
	Model         string            `json:"model"`
	MaxTokens     int64             `json:"max_tokens"`
	System        string            `json:"system,omitempty"`
	Messages      []anthropicTurn   `json:"messages"`
	Tools         []anthropicTool   `json:"tools,omitempty"`
	ToolChoice    map[string]string `json:"tool_choice,omitempty"`
	Temperature   *float64          `json:"temperature,omitempty"`
	TopP          *float64          `json:"top_p,omitempty"`
	StopSequences []string          `json:"stop_sequences,omitempty"`
	Thinking      *thinkingConfig   `json:"thinking,omitempty"`
	Stream        bool              `json:"stream,omitempty"`
}

// anthropicTurn is one message: a role and its content blocks (anthropicBlock or replayed
// thinkingBlock values).
type anthropicTurn struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

// anthropicBlock is a content block the request sends.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// thinkingConfig enables extended thinking with a token budget.
type thinkingConfig struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens"`
}

// messagesResponse is a non-streamed message, and the message of a message_start event.
type messagesResponse struct {
	ID         string           `json:"id"`
	Type       string           `json:"type"`
	Model      string           `json:"model"`
	Content    []responseBlock  `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      *anthropicUsage  `json:"usage"`
	Error      *json.RawMessage `json:"error"`
}

// responseBlock is a content block of an answer.
type responseBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

// anthropicUsage counts tokens; input_tokens excludes the cached prompt tokens.
type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// usage converts to the canonical usage, where Input counts every prompt token (uncached,
// written to the cache and read from it) and Cached the ones read from the cache, as with
// OpenAI.
func (u *anthropicUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	return Usage{
		Input:      u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		Output:     u.OutputTokens,
		Cached:     u.CacheReadInputTokens,
		CacheWrite: u.CacheCreationInputTokens,
	}
}

// merge takes the non-zero counts of a later usage report (message_delta carries the final
// output_tokens, and sometimes the input counts again).
func (u *anthropicUsage) merge(later *anthropicUsage) {
	if later == nil {
		return
	}
	for _, f := range []struct{ dst, src *int64 }{
		{&u.InputTokens, &later.InputTokens}, {&u.OutputTokens, &later.OutputTokens},
		{&u.CacheReadInputTokens, &later.CacheReadInputTokens}, {&u.CacheCreationInputTokens, &later.CacheCreationInputTokens},
	} {
		if *f.src > 0 {
			*f.dst = *f.src
		}
	}
}

// buildMessagesRequest converts a canonical request to the Anthropic wire form: system
// messages become the top-level system prompt, tool results user messages with tool_result
// blocks, consecutive messages of one role one message; max_tokens is always sent, sampling
// fields only when set, tool_choice only when set and tools are offered. Assistant messages
// start with the thinking blocks of their reasoning_state or, without one, the blocks replay
// remembers for their tool calls.
func buildMessagesRequest(req *Request, replay *thinkingMemory, stream bool) (*messagesRequest, error) {
	out := &messagesRequest{Model: req.Model, MaxTokens: DefaultAnthropicMaxTokens, Stream: stream}
	var system []string
	for _, m := range req.Messages {
		if m.GetRole() == typev1.Role_ROLE_SYSTEM {
			if strings.TrimSpace(m.GetContent()) != "" {
				system = append(system, m.GetContent())
			}
			continue
		}
		out.addTurn(anthropicMessage(m, replay))
	}
	out.System = strings.Join(system, "\n\n")
	for i, t := range req.Tools {
		out.Tools = append(out.Tools, anthropicTool{Name: t.GetName(), Description: t.GetDescription(), InputSchema: req.toolSchema(i)})
	}
	if req.ToolChoice != "" && len(req.Tools) > 0 {
		out.ToolChoice = anthropicToolChoice(req.ToolChoice)
	}
	if s := req.Sampling; s != nil {
		if s.GetMaxOutputTokens() > 0 {
			out.MaxTokens = s.GetMaxOutputTokens()
		}
		out.Temperature = s.Temperature
		out.TopP = s.TopP
		out.StopSequences = s.GetStop()
		thinking, err := thinkingFor(s.GetReasoningEffort(), out.MaxTokens)
		if err != nil {
			return nil, err
		}
		out.Thinking = thinking
	}
	if out.Thinking != nil {
		withThinking(out)
	}
	return out, nil
}

// withThinking drops from a request with extended thinking what the Messages API refuses with
// it (HTTP 400, INVALID_REQUEST, never retried): a temperature other than 1, a top_p under
// 0.95, and forced tool use (tool_choice any or a tool), which becomes auto. The model then
// may answer without the tool; the orchestrator's tool policy and final turn deal with that
// as with any model that does, where the request failed outright.
func withThinking(r *messagesRequest) {
	if r.Temperature != nil && *r.Temperature != 1 {
		r.Temperature = nil
	}
	if r.TopP != nil && *r.TopP < 0.95 {
		r.TopP = nil
	}
	if t := r.ToolChoice["type"]; t == "any" || t == "tool" {
		r.ToolChoice = map[string]string{"type": "auto"}
	}
}

// addTurn appends a message, merging it into the previous one when the role repeats (tool
// results and the user text after them form one user message, tool_result blocks first as
// the API requires); a message without content is dropped.
func (r *messagesRequest) addTurn(t anthropicTurn) {
	if len(t.Content) == 0 {
		return
	}
	n := len(r.Messages)
	if n == 0 || r.Messages[n-1].Role != t.Role {
		r.Messages = append(r.Messages, t)
		return
	}
	merged := append(r.Messages[n-1].Content, t.Content...)
	slices.SortStableFunc(merged, func(a, b any) int { return toolResultRank(a) - toolResultRank(b) })
	r.Messages[n-1].Content = merged
}

// toolResultRank orders tool_result blocks before the other blocks of a user message.
func toolResultRank(block any) int {
	if b, ok := block.(anthropicBlock); ok && b.Type == "tool_result" {
		return 0
	}
	return 1
}

// anthropicMessage converts one non-system message. Empty text is left out (the API rejects
// empty text blocks), and so is the content of an empty tool result.
func anthropicMessage(m *typev1.Message, replay *thinkingMemory) anthropicTurn {
	switch m.GetRole() {
	case typev1.Role_ROLE_TOOL:
		return anthropicTurn{Role: "user", Content: []any{anthropicBlock{Type: "tool_result", ToolUseID: m.GetToolCallId(), Content: m.GetContent()}}}
	case typev1.Role_ROLE_ASSISTANT:
		t := anthropicTurn{Role: "assistant"}
		for _, b := range replay.replay(m) {
			t.Content = append(t.Content, b)
		}
		if m.GetContent() != "" {
			t.Content = append(t.Content, anthropicBlock{Type: "text", Text: m.GetContent()})
		}
		for _, tc := range m.GetToolCalls() {
			t.Content = append(t.Content, anthropicBlock{Type: "tool_use", ID: tc.GetId(), Name: tc.GetName(), Input: toolInput(tc)})
		}
		return t
	}
	t := anthropicTurn{Role: "user"}
	if m.GetContent() != "" {
		t.Content = append(t.Content, anthropicBlock{Type: "text", Text: m.GetContent()})
	}
	return t
}

// toolInput is the input object of an earlier tool call: the raw arguments when they are a
// JSON object, else the canonical arguments, else {}.
func toolInput(tc *typev1.ToolCall) json.RawMessage {
	raw := strings.TrimSpace(tc.GetRawArguments())
	if strings.HasPrefix(raw, "{") && json.Valid([]byte(raw)) {
		return json.RawMessage(raw)
	}
	if tc.GetArguments() != nil {
		if data, err := structjson.Marshal(tc.GetArguments()); err == nil {
			return data
		}
	}
	return json.RawMessage(`{}`)
}

// anthropicToolChoice maps a canonical choice: auto, required (any), none, or a tool name.
func anthropicToolChoice(choice string) map[string]string {
	switch choice {
	case "auto", "none":
		return map[string]string{"type": choice}
	case "required":
		return map[string]string{"type": "any"}
	}
	return map[string]string{"type": "tool", "name": choice}
}

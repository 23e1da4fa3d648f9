package llmtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// MinThinkingBudget is the smallest thinking budget the Anthropic API accepts.
const MinThinkingBudget = 1024

// anthropicMessage is a non-streamed Anthropic message, and the message of message_start.
type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

// anthropicBlock is a content block of an answer.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// anthropicEvent is one event of a streamed message.
type anthropicEvent struct {
	Type         string            `json:"type"`
	Message      *anthropicMessage `json:"message,omitempty"`
	Index        *int              `json:"index,omitempty"`
	ContentBlock *anthropicBlock   `json:"content_block,omitempty"`
	Delta        any               `json:"delta,omitempty"`
	Usage        *outputUsage      `json:"usage,omitempty"`
}

// blockDelta is the delta of a content_block_delta event.
type blockDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	Signature   *string `json:"signature,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

// messageDelta is the delta of a message_delta event.
type messageDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

type outputUsage struct {
	OutputTokens int `json:"output_tokens"`
}

// anthropicError is an Anthropic error body.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// newAnthropicError builds an Anthropic error body.
func newAnthropicError(typ, msg string) anthropicError {
	e := anthropicError{Type: "error"}
	e.Error.Type, e.Error.Message = typ, msg
	return e
}

// Sign returns the signature the server gives a thinking text; a request that sends a
// thinking block back must carry it unchanged.
func Sign(thinking string) string {
	sum := sha256.Sum256([]byte("llmtest thinking\x00" + thinking))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// anthropicStop maps the turn's finish reason to an Anthropic stop reason: stop end_turn,
// length max_tokens, tool_calls tool_use, content_filter refusal; others pass unchanged.
func (t Turn) anthropicStop() string {
	switch r := t.finishReason(); r {
	case "stop":
		return "end_turn"
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "content_filter":
		return "refusal"
	default:
		return r
	}
}

// anthropicCallID is the call's scripted id or "toolu_<turn>_<n>".
func (a answer) anthropicCallID(i int, c ToolCall) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("toolu_%d_%d", a.turn, i+1)
}

// anthropicUsageFor is usageFor in Anthropic's terms: input_tokens excludes the parts read
// from and written to the cache.
func anthropicUsageFor(req Request, t Turn) anthropicUsage {
	u := usageFor(req, t)
	cached, written := 0, 0
	if u.PromptTokensDetails != nil {
		cached = u.PromptTokensDetails.CachedTokens
	}
	if t.Usage != nil {
		written = t.Usage.CacheWriteTokens
	}
	return anthropicUsage{InputTokens: u.PromptTokens - cached - written, CacheReadInputTokens: cached, CacheCreationInputTokens: written,
		OutputTokens: u.CompletionTokens}
}

// toolInput is the input of a scripted call in a JSON answer: the arguments when they are a
// JSON object, {} when empty, else the raw text as a JSON string.
func toolInput(args string) json.RawMessage {
	trimmed := strings.TrimSpace(args)
	switch {
	case trimmed == "":
		return json.RawMessage(`{}`)
	case strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)):
		return json.RawMessage(trimmed)
	}
	data, _ := json.Marshal(args)
	return data
}

// writeMessage writes the answer as one Anthropic message: a signed thinking block, a text
// block and tool_use blocks.
func (a answer) writeMessage(w http.ResponseWriter, req Request) {
	var content []anthropicBlock
	if a.t.Reasoning != "" {
		sig := Sign(a.t.Reasoning)
		content = append(content, anthropicBlock{Type: "thinking", Thinking: &a.t.Reasoning, Signature: &sig})
	}
	if a.t.Content != "" {
		content = append(content, anthropicBlock{Type: "text", Text: &a.t.Content})
	}
	for i, c := range a.t.ToolCalls {
		content = append(content, anthropicBlock{Type: "tool_use", ID: a.anthropicCallID(i, c), Name: c.Name, Input: toolInput(c.Arguments)})
	}
	if content == nil {
		content = []anthropicBlock{}
	}
	stop := a.t.anthropicStop()
	writeJSON(w, http.StatusOK, anthropicMessage{
		ID: a.id, Type: "message", Role: "assistant", Model: a.model, Content: content,
		StopReason: &stop, Usage: anthropicUsageFor(req, a.t),
	})
}

// writeMessageStream writes the answer as Anthropic server-sent events: message_start, a
// ping, a thinking block (thinking_delta words, then signature_delta), a text block
// (text_delta words), tool_use blocks (input_json_delta fragments), message_delta with the
// stop reason and output usage, and message_stop.
func (a answer) writeMessageStream(w http.ResponseWriter, req Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(ev anthropicEvent) {
		data, _ := json.Marshal(ev)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, data)
		_ = rc.Flush()
	}
	usage := anthropicUsageFor(req, a.t)
	started := usage
	started.OutputTokens = 1
	send(anthropicEvent{Type: "message_start", Message: &anthropicMessage{
		ID: a.id, Type: "message", Role: "assistant", Model: a.model, Content: []anthropicBlock{}, Usage: started,
	}})
	if a.t.Streaming != nil {
		a.t.Streaming()
	}
	send(anthropicEvent{Type: "ping"})

	index := 0
	// block sends a content block, and reports false when the stream broke off in it.
	block := func(start anthropicBlock, deltas []blockDelta) bool {
		i := index
		index++
		send(anthropicEvent{Type: "content_block_start", Index: &i, ContentBlock: &start})
		for j, d := range deltas {
			send(anthropicEvent{Type: "content_block_delta", Index: &i, Delta: d})
			if start.Type == "text" && a.cutAfter(j, len(deltas)) {
				if a.t.StreamCut == CutDrop {
					dropStream()
				}
				data, _ := json.Marshal(newAnthropicError("overloaded_error", "Overloaded"))
				_, _ = fmt.Fprintf(w, "event: error\ndata: %s\n\n", data)
				_ = rc.Flush()
				return false
			}
		}
		send(anthropicEvent{Type: "content_block_stop", Index: &i})
		return true
	}
	empty := ""
	if a.t.Reasoning != "" {
		var deltas []blockDelta
		for _, piece := range words(a.t.Reasoning) {
			deltas = append(deltas, blockDelta{Type: "thinking_delta", Thinking: &piece})
		}
		sig := Sign(a.t.Reasoning)
		deltas = append(deltas, blockDelta{Type: "signature_delta", Signature: &sig})
		block(anthropicBlock{Type: "thinking", Thinking: &empty, Signature: &empty}, deltas)
	}
	if a.t.Content != "" {
		var deltas []blockDelta
		for _, piece := range words(a.t.Content) {
			deltas = append(deltas, blockDelta{Type: "text_delta", Text: &piece})
		}
		if !block(anthropicBlock{Type: "text", Text: &empty}, deltas) {
			return
		}
	}
	for i, c := range a.t.ToolCalls {
		deltas := []blockDelta{{Type: "input_json_delta", PartialJSON: &empty}}
		for _, frag := range fragments(c.Arguments, argumentFragment) {
			deltas = append(deltas, blockDelta{Type: "input_json_delta", PartialJSON: &frag})
		}
		block(anthropicBlock{Type: "tool_use", ID: a.anthropicCallID(i, c), Name: c.Name, Input: json.RawMessage(`{}`)}, deltas)
	}
	send(anthropicEvent{Type: "message_delta", Delta: messageDelta{StopReason: a.t.anthropicStop()}, Usage: &outputUsage{OutputTokens: usage.OutputTokens}})
	send(anthropicEvent{Type: "message_stop"})
}

// forcesToolUse reports whether an Anthropic tool_choice forces a tool (any, or a named tool),
// which extended thinking does not allow.
func forcesToolUse(choice json.RawMessage) bool {
	var c struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(choice, &c) == nil && (c.Type == "any" || c.Type == "tool")
}

// checkAnthropic returns the error the real Anthropic API would answer a request with, or
// "": a missing anthropic-version header or max_tokens, a system message in messages, an
// empty text block, a thinking budget under 1024 or not below max_tokens, a thinking block
// whose signature this server did not issue, and, with thinking enabled, a temperature other
// than 1, a top_p under 0.95, forced tool use, or a last assistant message with tool_use
// blocks that does not start with its thinking block.
func checkAnthropic(req Request) string {
	switch {
	case req.Header.Get("anthropic-version") == "":
		return "anthropic-version: header is required"
	case req.MaxTokens == nil:
		return "max_tokens: Field required"
	}
	thinking := req.Thinking != nil && req.Thinking.Type == "enabled"
	if thinking {
		switch {
		case req.Thinking.BudgetTokens < MinThinkingBudget:
			return fmt.Sprintf("thinking.enabled.budget_tokens: Input should be greater than or equal to %d", MinThinkingBudget)
		case req.Thinking.BudgetTokens >= *req.MaxTokens:
			return "`max_tokens` must be greater than `thinking.budget_tokens`"
		case req.Temperature != nil && *req.Temperature != 1:
			return "`temperature` may only be set to 1 when thinking is enabled"
		case req.TopP != nil && *req.TopP < 0.95:
			return "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled"
		case forcesToolUse(req.ToolChoice):
			return "Thinking may not be enabled when tool_choice forces tool use."
		}
	}
	lastAssistant := -1
	for i, m := range req.Messages {
		switch m.Role {
		case "user":
		case "assistant":
			lastAssistant = i
		default:
			return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		for j, b := range m.Blocks {
			switch {
			case b.Type == "text" && b.Text == "":
				return fmt.Sprintf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
			case b.Type == "thinking" && b.Signature != Sign(b.Thinking):
				return fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
		if len(m.Blocks) == 0 && m.Content == "" {
			return fmt.Sprintf("messages.%d: all messages must have non-empty content", i)
		}
	}
	if thinking && lastAssistant >= 0 {
		blocks := req.Messages[lastAssistant].Blocks
		hasToolUse := false
		for _, b := range blocks {
			hasToolUse = hasToolUse || b.Type == "tool_use"
		}
		if hasToolUse && blocks[0].Type != "thinking" && blocks[0].Type != "redacted_thinking" {
			return fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. "+
				"When `thinking` is enabled, a final `assistant` message must start with a thinking block.", lastAssistant, blocks[0].Type)
		}
	}
	return ""
}

package llmtest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Request is one decoded request the server received, chat completion or embeddings.
type Request struct {
	// Path is the URL path, e.g. "/v1/chat/completions".
	Path string `json:"-"`
	// Header is the request's HTTP header.
	Header http.Header `json:"-"`
	// Raw holds every top-level field of the body as sent, to check presence or absence.
	Raw map[string]json.RawMessage `json:"-"`

	// Model is the requested model.
	Model string `json:"model"`
	// Messages is the conversation (chat completions).
	Messages []Message `json:"messages"`
	// Tools are the tools offered (chat completions).
	Tools []Tool `json:"tools"`
	// ToolChoice is the raw tool_choice value, nil when absent.
	ToolChoice json.RawMessage `json:"tool_choice"`
	// Temperature is nil when absent.
	Temperature *float64 `json:"temperature"`
	// TopP is nil when absent.
	TopP *float64 `json:"top_p"`
	// MaxTokens is nil when absent.
	MaxTokens *int `json:"max_tokens"`
	// MaxCompletionTokens is max_completion_tokens (OpenAI), nil when absent.
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	// ReasoningEffort is reasoning_effort.
	ReasoningEffort string `json:"reasoning_effort"`
	// Stop holds the stop sequences.
	Stop []string `json:"stop"`
	// Stream asks for server-sent events.
	Stream bool `json:"stream"`
	// StreamOptions are the streaming options.
	StreamOptions *StreamOptions `json:"stream_options"`
	// Input holds the texts of an embeddings request.
	Input Texts `json:"input"`

	// System is the top-level system prompt of an Anthropic messages request (text blocks
	// joined).
	System Text `json:"system"`
	// Thinking is the extended thinking configuration of an Anthropic request, nil when
	// absent.
	Thinking *Thinking `json:"thinking"`
	// StopSequences are the stop sequences of an Anthropic request.
	StopSequences []string `json:"stop_sequences"`
}

// Thinking is the thinking field of an Anthropic messages request.
type Thinking struct {
	// Type is "enabled" or "disabled".
	Type string `json:"type"`
	// BudgetTokens is the thinking budget.
	BudgetTokens int `json:"budget_tokens"`
}

// StreamOptions is stream_options of a chat completion request.
type StreamOptions struct {
	// IncludeUsage asks for a final usage chunk.
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a chat completion request.
type Message struct {
	// Role is system, user, assistant or tool.
	Role string `json:"role"`
	// Content is the text content (text parts are joined).
	Content Text `json:"content"`
	// Name is the optional author name.
	Name string `json:"name,omitempty"`
	// ToolCalls are the assistant's tool calls.
	ToolCalls []WireToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to its call.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Blocks are the content blocks when content is an array (Anthropic messages carry
	// text, tool_use, tool_result and thinking blocks); nil for string content.
	Blocks []Block `json:"-"`
}

// UnmarshalJSON decodes a message, keeping array content as Blocks too.
func (m *Message) UnmarshalJSON(data []byte) error {
	var w wireMessage
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	return w.decode(m)
}

// plainMessage is Message without its UnmarshalJSON.
type plainMessage Message

// wireMessage is a message as decoded from JSON: its content kept raw, to be read as a
// string, null or an array of parts (decode). A request's messages are decoded as
// wireMessage, which has no UnmarshalJSON of its own, so that the decoder reads each message
// once: a Message's UnmarshalJSON gets the message's bytes to decode again, after the
// decoder has read them, and the scripted model read every message of a long conversation
// several times over, time a benchmark counted as the mesh's (issue 15).
type wireMessage struct {
	plainMessage
	Content json.RawMessage `json:"content"` // shadows plainMessage's
}

// decode sets m to the message w holds.
func (w *wireMessage) decode(m *Message) error {
	*m = Message(w.plainMessage)
	c := bytes.TrimSpace(w.Content)
	if len(c) == 0 {
		return nil
	}
	if err := m.Content.UnmarshalJSON(c); err != nil {
		return err
	}
	if c[0] == '[' {
		return json.Unmarshal(c, &m.Blocks)
	}
	return nil
}

// Block is one content block of an Anthropic message.
type Block struct {
	// Type is text, tool_use, tool_result, thinking, redacted_thinking or image.
	Type string `json:"type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// ID is the id of a tool_use block.
	ID string `json:"id,omitempty"`
	// Name is the tool name of a tool_use block.
	Name string `json:"name,omitempty"`
	// Input is the input object of a tool_use block.
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID links a tool_result block to its tool_use.
	ToolUseID string `json:"tool_use_id,omitempty"`
	// Content is the content of a tool_result block (text blocks joined).
	Content Text `json:"content,omitempty"`
	// IsError marks a failed tool_result.
	IsError bool `json:"is_error,omitempty"`
	// Thinking is the text of a thinking block.
	Thinking string `json:"thinking,omitempty"`
	// Signature is the signature of a thinking block.
	Signature string `json:"signature,omitempty"`
	// Data is the opaque content of a redacted_thinking block.
	Data string `json:"data,omitempty"`
}

// WireToolCall is a tool call as the OpenAI API carries it.
type WireToolCall struct {
	// Index is the call's position (streamed fragments only).
	Index *int `json:"index,omitempty"`
	// ID is the call identifier.
	ID string `json:"id,omitempty"`
	// Type is "function".
	Type string `json:"type,omitempty"`
	// Function holds name and arguments.
	Function WireFunction `json:"function"`
}

// WireFunction is the function part of a tool call.
type WireFunction struct {
	// Name is the tool name.
	Name string `json:"name,omitempty"`
	// Arguments is the raw JSON text of the arguments.
	Arguments string `json:"arguments,omitempty"`
}

// Tool is one offered tool, in the OpenAI form (Type and Function) or the Anthropic form
// (Name, Description and InputSchema).
type Tool struct {
	// Type is "function" (OpenAI).
	Type string `json:"type,omitempty"`
	// Function describes the tool (OpenAI).
	Function ToolFunction `json:"function"`
	// Name is the tool name (Anthropic).
	Name string `json:"name,omitempty"`
	// Description is shown to the model (Anthropic).
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON schema of the input (Anthropic).
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// ToolFunction is the function part of an offered tool.
type ToolFunction struct {
	// Name is the tool name.
	Name string `json:"name"`
	// Description is shown to the model.
	Description string `json:"description,omitempty"`
	// Parameters is the JSON schema of the arguments.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// Text is message content: a JSON string, null, or an array of content parts whose text
// parts are joined.
type Text string

// UnmarshalJSON accepts a string, null or an array of {"type":"text","text":...} parts.
func (t *Text) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if s, ok := plainString(data); ok {
		*t = Text(s)
		return nil
	}
	switch {
	case bytes.Equal(data, []byte("null")):
		*t = ""
		return nil
	case len(data) > 0 && data[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(data, &parts); err != nil {
			return err
		}
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		*t = Text(b.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*t = Text(s)
	return nil
}

// plainString is the JSON string data holds when it has no escapes (most message contents),
// read without a decoder.
func plainString(data []byte) (string, bool) {
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return "", false
	}
	inner := data[1 : len(data)-1]
	for _, c := range inner {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(inner) {
		return "", false // the decoder replaces invalid bytes
	}
	return string(inner), true
}

// Texts is embeddings input: a single string or an array of strings.
type Texts []string

// UnmarshalJSON accepts a string or an array of strings.
func (t *Texts) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*t = Texts{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(data, &list); err != nil {
		return err
	}
	*t = list
	return nil
}

// ToolNames returns the names of the offered tools, in request order.
func (r Request) ToolNames() []string {
	names := make([]string, 0, len(r.Tools))
	for _, tool := range r.Tools {
		names = append(names, cmp.Or(tool.Function.Name, tool.Name))
	}
	return names
}

// ToolChoiceName returns tool_choice as a string: the mode ("auto", "none", "required"), the
// function name of a named choice, or "" when absent. Anthropic's {"type": "auto"},
// {"type": "none"}, {"type": "any"} and {"type": "tool", "name": ...} read as "auto",
// "none", "required" and the tool name.
func (r Request) ToolChoiceName() string {
	if len(r.ToolChoice) == 0 {
		return ""
	}
	var mode string
	if json.Unmarshal(r.ToolChoice, &mode) == nil {
		return mode
	}
	var named struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(r.ToolChoice, &named) != nil {
		return string(r.ToolChoice)
	}
	switch named.Type {
	case "function":
		return named.Function.Name
	case "tool":
		return named.Name
	case "any":
		return "required"
	}
	return named.Type
}

// Has reports whether the body carried the top-level field, even as null.
func (r Request) Has(field string) bool {
	_, ok := r.Raw[field]
	return ok
}

// stopSequences returns stop (OpenAI) or stop_sequences (Anthropic).
func (r Request) stopSequences() []string {
	if r.StopSequences != nil {
		return r.StopSequences
	}
	return r.Stop
}

// firstUserMessage returns the content of the first user message, or "".
func (r Request) firstUserMessage() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return string(m.Content)
		}
	}
	return ""
}

// assistantCount is the number of assistant messages, which selects the turn to answer.
func (r Request) assistantCount() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// reasoningModel matches the OpenAI reasoning models (o1, o3, o4-mini, the gpt-5 family),
// which refuse max_tokens: they take max_completion_tokens.
var reasoningModel = regexp.MustCompile(`^(o[1-9]\d*(-|$)|gpt-5)`)

// checkOpenAI returns why the OpenAI API would refuse a chat completion request, or "".
func checkOpenAI(req Request) string {
	model := req.Model[strings.LastIndex(req.Model, "/")+1:]
	if req.MaxTokens != nil && reasoningModel.MatchString(strings.ToLower(model)) {
		return "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
	}
	return ""
}

// checkRequest returns why the API of a chat request would refuse it, or "".
func checkRequest(req Request, api dialect) string {
	if api == anthropicAPI {
		return checkAnthropic(req)
	}
	return checkOpenAI(req)
}

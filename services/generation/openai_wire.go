package generation

import (
	"bytes"
	"encoding/json"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/structjson"
)

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model           string         `json:"model"`
	Messages        []chatMessage  `json:"messages"`
	Tools           []chatTool     `json:"tools,omitempty"`
	ToolChoice      any            `json:"tool_choice,omitempty"`
	Temperature     *float64       `json:"temperature,omitempty"`
	TopP            *float64       `json:"top_p,omitempty"`
	MaxTokens       int64          `json:"max_tokens,omitempty"`
	MaxCompletion   int64          `json:"max_completion_tokens,omitempty"`
	ReasoningEffort string         `json:"reasoning_effort,omitempty"`
	Stop            []string       `json:"stop,omitempty"`
	Stream          bool           `json:"stream,omitempty"`
	StreamOptions   *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []wireCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type wireCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// chatResponse is a non-streamed chat completion.
type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message      wireAnswer `json:"message"`
		FinishReason string     `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage       `json:"usage"`
	Error *json.RawMessage `json:"error"`
}

// wireAnswer is an assistant message or a streamed delta. Refusal is the text of a model that
// declines to answer, which OpenAI sends instead of content (content null).
type wireAnswer struct {
	Content          wireText   `json:"content"`
	Refusal          string     `json:"refusal"`
	ReasoningContent string     `json:"reasoning_content"`
	Reasoning        string     `json:"reasoning"`
	ToolCalls        []wireCall `json:"tool_calls"`
}

// reasoning is reasoning_content, or reasoning as some servers name it.
func (a wireAnswer) reasoning() string {
	if a.ReasoningContent != "" {
		return a.ReasoningContent
	}
	return a.Reasoning
}

type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// usage converts the wire usage; nil is zero.
func (u *wireUsage) usage() Usage {
	if u == nil {
		return Usage{}
	}
	out := Usage{Input: u.PromptTokens, Output: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.Cached = u.PromptTokensDetails.CachedTokens
	}
	return out
}

// chatChunk is one streamed chunk; an error event is one whose error is set or, from servers
// that send the error object itself, whose object is "error".
type chatChunk struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta        wireAnswer `json:"delta"`
		FinishReason *string    `json:"finish_reason"`
	} `json:"choices"`
	Usage *wireUsage       `json:"usage"`
	Error *json.RawMessage `json:"error"`
}

// wireText is content: a string, null, or an array of parts whose text parts are joined.
type wireText string

// UnmarshalJSON accepts a string, null or an array of {"type":"text","text":...} parts.
func (t *wireText) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		*t = ""
		return nil
	case len(data) > 0 && data[0] == '[':
		var parts []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(data, &parts); err != nil {
			return err
		}
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		*t = wireText(b.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*t = wireText(s)
	return nil
}

type embeddingsRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
}

type embeddingsResponse struct {
	Model string `json:"model"`
	Data  []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Usage *wireUsage `json:"usage"`
}

// buildChatRequest converts a canonical request to the OpenAI wire form: sampling fields only
// when set, the output token limit in limitField, tool_choice only when set and tools are
// offered. Temperature and top_p are left out for OpenAI's reasoning models, which accept only
// their defaults and refuse any value with HTTP 400.
func buildChatRequest(req *Request, stream bool, limitField string) *chatRequest {
	out := &chatRequest{Model: req.Model}
	for _, m := range req.Messages {
		out.Messages = append(out.Messages, wireMessage(m))
	}
	for i, t := range req.Tools {
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: toolFunction{
			Name: t.GetName(), Description: t.GetDescription(), Parameters: req.toolSchema(i),
		}})
	}
	if req.ToolChoice != "" && len(req.Tools) > 0 {
		out.ToolChoice = wireToolChoice(req.ToolChoice)
	}
	if s := req.Sampling; s != nil {
		if !isReasoningModel(req.Model) {
			out.Temperature = s.Temperature
			out.TopP = s.TopP
		}
		if limitField == MaxCompletionTokensField {
			out.MaxCompletion = s.GetMaxOutputTokens()
		} else {
			out.MaxTokens = s.GetMaxOutputTokens()
		}
		out.ReasoningEffort = s.GetReasoningEffort()
		out.Stop = s.GetStop()
	}
	if stream {
		out.Stream = true
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	return out
}

// wireToolChoice is a mode as a string, or a tool name as a named function choice.
func wireToolChoice(choice string) any {
	switch choice {
	case "auto", "none", "required":
		return choice
	}
	return map[string]any{"type": "function", "function": map[string]string{"name": choice}}
}

// wireRoles maps canonical roles to OpenAI roles.
var wireRoles = map[typev1.Role]string{
	typev1.Role_ROLE_SYSTEM:    "system",
	typev1.Role_ROLE_USER:      "user",
	typev1.Role_ROLE_ASSISTANT: "assistant",
	typev1.Role_ROLE_TOOL:      "tool",
}

// wireMessage converts one canonical message: assistant tool calls carry their raw argument
// text, tool messages their tool_call_id.
func wireMessage(m *typev1.Message) chatMessage {
	content := m.GetContent()
	out := chatMessage{Role: wireRoles[m.GetRole()], Content: &content}
	if m.GetRole() == typev1.Role_ROLE_TOOL {
		out.ToolCallID = m.GetToolCallId()
		return out
	}
	out.Name = m.GetName()
	for _, tc := range m.GetToolCalls() {
		out.ToolCalls = append(out.ToolCalls, wireCall{
			ID: tc.GetId(), Type: "function", Function: wireFunction{Name: tc.GetName(), Arguments: callArguments(tc)},
		})
	}
	if content == "" && len(out.ToolCalls) > 0 {
		out.Content = nil
	}
	return out
}

// callArguments is the argument text to send back: the raw text as the model produced it
// when it parsed, else the canonical arguments (compact JSON, sorted keys), else "{}".
func callArguments(tc *typev1.ToolCall) string {
	if raw := tc.GetRawArguments(); raw != "" && json.Valid([]byte(raw)) {
		return raw
	}
	if tc.GetArguments() != nil {
		if data, err := structjson.Marshal(tc.GetArguments()); err == nil {
			return string(data)
		}
	}
	return "{}"
}

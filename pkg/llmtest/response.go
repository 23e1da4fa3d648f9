package llmtest

import "fmt"

// completion is a non-streamed chat completion body.
type completion struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []choice      `json:"choices"`
	Usage   *usagePayload `json:"usage,omitempty"`
}

type choice struct {
	Index        int           `json:"index"`
	Message      answerMessage `json:"message"`
	FinishReason string        `json:"finish_reason"`
}

type answerMessage struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	Refusal          *string        `json:"refusal"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []WireToolCall `json:"tool_calls,omitempty"`
}

// chunk is one streamed chat completion chunk.
type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usagePayload `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role             string         `json:"role,omitempty"`
	Content          string         `json:"content,omitempty"`
	Refusal          string         `json:"refusal,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []WireToolCall `json:"tool_calls,omitempty"`
}

type usagePayload struct {
	PromptTokens        int            `json:"prompt_tokens"`
	CompletionTokens    int            `json:"completion_tokens"`
	TotalTokens         int            `json:"total_tokens"`
	PromptTokensDetails *tokensDetails `json:"prompt_tokens_details,omitempty"`
}

type tokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type embeddingList struct {
	Object string          `json:"object"`
	Data   []embeddingItem `json:"data"`
	Model  string          `json:"model"`
	Usage  *usagePayload   `json:"usage,omitempty"`
}

type embeddingItem struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

// errorBody is an OpenAI error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// newErrorBody builds an OpenAI error body.
func newErrorBody(typ, code, format string, args ...any) errorBody {
	d := errorDetail{Message: fmt.Sprintf(format, args...), Type: typ}
	if code != "" {
		d.Code = &code
	}
	return errorBody{Error: d}
}

// usageFor returns the turn's usage, or an estimate of one token per four bytes of the
// request's system prompt and messages and of the answer.
func usageFor(req Request, t Turn) *usagePayload {
	if t.Usage != nil {
		u := &usagePayload{
			PromptTokens:     t.Usage.PromptTokens,
			CompletionTokens: t.Usage.CompletionTokens,
			TotalTokens:      t.Usage.PromptTokens + t.Usage.CompletionTokens,
		}
		if t.Usage.CachedTokens > 0 {
			u.PromptTokensDetails = &tokensDetails{CachedTokens: t.Usage.CachedTokens}
		}
		return u
	}
	in := len(req.System)
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, c := range m.ToolCalls {
			in += len(c.Function.Name) + len(c.Function.Arguments)
		}
		for _, b := range m.Blocks {
			if b.Type != "text" {
				in += len(b.Name) + len(b.Input) + len(b.Content) + len(b.Thinking)
			}
		}
	}
	out := len(t.Content) + len(t.Reasoning) + len(t.Refusal)
	for _, c := range t.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	u := &usagePayload{PromptTokens: ceilDiv(in, 4), CompletionTokens: ceilDiv(out, 4)}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func ceilDiv(n, d int) int { return (n + d - 1) / d }

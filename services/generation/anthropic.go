package generation

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// Defaults of AnthropicOptions and of the requests.
const (
	// DefaultAnthropicBaseURL is the Anthropic API root.
	DefaultAnthropicBaseURL = "https://api.anthropic.com/v1"
	// DefaultAnthropicVersion is the anthropic-version header sent.
	DefaultAnthropicVersion = "2023-06-01"
	// DefaultAnthropicMaxTokens is max_tokens when the request's Sampling has no
	// max_output_tokens (the API requires the field).
	DefaultAnthropicMaxTokens = 4096
)

// AnthropicOptions configures an Anthropic Messages API provider.
type AnthropicOptions struct {
	// Name is the provider name reported in spans and errors; "" means "anthropic".
	Name string
	// BaseURL is the API root; "" means DefaultAnthropicBaseURL. Failures that name it mask its
	// password, if any.
	BaseURL string
	// APIKey is sent as the x-api-key header when set.
	APIKey string
	// Headers are added to every request (e.g. anthropic-beta).
	Headers map[string]string
	// Timeout bounds one whole call, retries and streaming included; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is how often connection errors and 5xx (including 529 overloaded), 408 and
	// 409 answers are retried; 0 means DefaultMaxRetries (none) and a negative value
	// disables retries.
	MaxRetries int
	// Version is the anthropic-version header; "" means DefaultAnthropicVersion.
	Version string
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between retries (a
	// Retry-After header wins, capped at RetryWaitMax); 0 means the defaults.
	RetryWaitMin, RetryWaitMax time.Duration
	// HTTPClient sends the requests; nil means a pooled client without a timeout of its own
	// that keeps up to 256 idle connections to the provider. Either follows no redirect (a
	// copy of the client is used, its CheckRedirect replaced).
	HTTPClient *http.Client
}

// anthropic is a provider speaking the Anthropic Messages API.
type anthropic struct {
	*endpoint
	thinking *thinkingMemory
}

// NewAnthropic returns a provider for the Anthropic Messages API (POST {base}/messages). System
// messages become the top-level system prompt, tools are sent with their input_schema, tool
// calls and results travel as tool_use and tool_result blocks, and thinking blocks become the
// reasoning. The signed thinking and redacted_thinking blocks of an answer are its
// reasoning_state (JSON, {"anthropic_thinking": [blocks]}), and an assistant message's
// reasoning_state is sent back as the blocks opening that message; for callers that drop the
// state, the blocks of answers with tool calls are also remembered in the process, by tool
// call id, as a fallback. Sampling.reasoning_effort turns on extended thinking (see
// MinThinkingBudget for the mapping to budget_tokens); max_tokens is always sent, DefaultAnthropicMaxTokens when the
// request has no max_output_tokens. Stop reasons are normalised (end_turn stop, max_tokens
// length, tool_use tool_calls, refusal content_filter). Failures are classified like
// NewOpenAI's, with 529 overloaded as SERVER and billing errors as QUOTA.
func NewAnthropic(opts AnthropicOptions) Provider {
	fixed := http.Header{"Anthropic-Version": {cmp.Or(opts.Version, DefaultAnthropicVersion)}}
	if opts.APIKey != "" {
		fixed.Set("X-Api-Key", opts.APIKey)
	}
	return &anthropic{
		endpoint: newEndpoint(endpointOptions{
			name:       cmp.Or(opts.Name, "anthropic"),
			baseURL:    cmp.Or(opts.BaseURL, DefaultAnthropicBaseURL),
			apiKey:     opts.APIKey,
			fixed:      fixed,
			headers:    opts.Headers,
			timeout:    opts.Timeout,
			maxRetries: opts.MaxRetries,
			waitMin:    opts.RetryWaitMin,
			waitMax:    opts.RetryWaitMax,
			httpClient: opts.HTTPClient,
		}),
		thinking: newThinkingMemory(),
	}
}

// Name returns the configured provider name.
func (a *anthropic) Name() string { return a.name }

// Complete makes one non-streamed messages call.
func (a *anthropic) Complete(ctx context.Context, req *Request) (*Response, error) {
	body, err := buildMessagesRequest(req, a.thinking, false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	resp, err := a.post(ctx, "/messages", body, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := a.readAll(ctx, resp)
	if err != nil {
		return nil, err
	}
	return a.parseMessage(data)
}

// parseMessage decodes a non-streamed message.
func (a *anthropic) parseMessage(body []byte) (*Response, error) {
	var m messagesResponse
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, a.badResponse("the message is not valid JSON (%v): %s", err, snippet(body))
	}
	if m.Type == "error" && m.Error != nil {
		return nil, a.answerError("in the answer", parseErrorBody(body), *m.Error)
	}
	if m.Type != "message" {
		return nil, a.badResponse("the answer is not a message (type %q): %s", m.Type, snippet(body))
	}
	acc := newMessageAccumulator()
	acc.start(&m)
	for i, b := range m.Content {
		acc.addBlock(i, b)
	}
	return acc.response(a.thinking), nil
}

// Embed fails: the Anthropic API has no embeddings endpoint.
func (a *anthropic) Embed(context.Context, string, []string) (*Embeddings, error) {
	return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
		"%s: the Anthropic Messages API has no embeddings endpoint; embed with an openai-compatible provider", a.name)
}

// messageAccumulator assembles an answer from content blocks, whole or streamed. The blocks
// are placed by their index: the answer's text and tool calls come in the order of their
// blocks' indices, whatever order a stream started the blocks in.
type messageAccumulator struct {
	model  string
	stop   string
	usage  anthropicUsage
	blocks map[int]*blockState
	// next is the lowest index of a streamed block not started: the blocks of the indices
	// below it are placed (place), their tool calls numbered (calls of them) and their deltas
	// forwarded as they come.
	next  int
	calls int
	// size is the bytes of the blocks' text, thinking, input and signatures (answerTooLarge).
	size int
}

// blockState is one content block being assembled.
type blockState struct {
	typ       string
	text      strings.Builder
	id, name  string
	call      int             // position among the answer's tool calls (tool_use blocks)
	input     json.RawMessage // input of a whole tool_use block
	partial   strings.Builder // streamed input_json_delta fragments
	flushed   bool            // the whole input was forwarded for want of fragments
	stopped   bool            // content_block_stop came
	signature string
	data      string
	// placed is set once the block's place among the answer's blocks is certain; until then
	// its deltas are held.
	placed bool
	held   []*generationv1.Delta
}

func newMessageAccumulator() *messageAccumulator {
	return &messageAccumulator{blocks: map[int]*blockState{}}
}

// start records the message envelope: model, stop reason and usage.
func (m *messageAccumulator) start(msg *messagesResponse) {
	m.model = msg.Model
	m.stop = msg.StopReason
	m.usage.merge(msg.Usage)
}

// addBlock starts block index from a whole (or just started) content block.
func (m *messageAccumulator) addBlock(index int, b responseBlock) *blockState {
	s := &blockState{typ: b.Type, id: b.ID, name: b.Name, input: b.Input, signature: b.Signature, data: b.Data}
	s.text.WriteString(b.Text)
	s.text.WriteString(b.Thinking)
	m.size += len(b.Text) + len(b.Thinking) + len(b.Input) + len(b.Signature) + len(b.Data) +
		len(b.ID) + len(b.Name)
	m.blocks[index] = s
	return s
}

// indices are the indices of the blocks, in order.
func (m *messageAccumulator) indices() []int {
	return slices.Sorted(maps.Keys(m.blocks))
}

// response is the assembled answer; its thinking blocks become its reasoning state and,
// when it has tool calls, are remembered for replay.
func (m *messageAccumulator) response(memory *thinkingMemory) *Response {
	out := &Response{Model: m.model, Usage: m.usage.usage()}
	var content, reasoning strings.Builder
	var thinking []thinkingBlock
	for _, i := range m.indices() {
		b := m.blocks[i]
		switch b.typ {
		case "text":
			content.WriteString(b.text.String())
		case "thinking":
			text := b.text.String()
			reasoning.WriteString(text)
			thinking = append(thinking, thinkingBlock{Type: "thinking", Thinking: &text, Signature: b.signature})
		case "redacted_thinking":
			thinking = append(thinking, thinkingBlock{Type: "redacted_thinking", Data: b.data})
		case "tool_use":
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: b.id, Name: b.name, Arguments: b.arguments()})
		}
	}
	out.Content = content.String()
	out.Reasoning = reasoning.String()
	out.FinishReason = normaliseFinish(m.stop, len(out.ToolCalls) > 0)
	out.ContextFull = contextFull(m.stop)
	out.ReasoningState = encodeThinking(thinking)
	memory.remember(thinking, out.ToolCalls)
	return out
}

// arguments is the raw argument text of a tool_use block: the streamed fragments when there
// were any, else the block's input, else "{}".
func (b *blockState) arguments() string {
	if b.partial.Len() > 0 {
		return b.partial.String()
	}
	if len(b.input) > 0 {
		return string(b.input)
	}
	return "{}"
}

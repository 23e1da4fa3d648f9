package generation

import (
	"context"
	"encoding/json"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
)

// Provider is one configured LLM backend. Implementations return failures as
// stageerr.Generation errors carrying the error class (AUTH, QUOTA, RATE_LIMITED, TIMEOUT,
// NETWORK, SERVER, BAD_RESPONSE) and, for rate limits, the provider's retry delay.
type Provider interface {
	// Name is the provider's name, reported as gen_ai.provider.name.
	Name() string
	// Complete makes one non-streamed chat call. A call whose answer failed part way may
	// return that part, with its usage, beside its error, as Stream does.
	Complete(ctx context.Context, req *Request) (*Response, error)
	// Stream makes one streamed chat call, passing text, reasoning and tool-call fragments to
	// onDelta as they arrive, and returns the complete answer. Tool-call fragments carry the
	// call's position among the answer's tool calls, its id and name on the first fragment,
	// and argument text that concatenates to the call's raw arguments. An error from onDelta
	// aborts the call. A call that fails after part of the answer arrived may return that
	// part, with the usage the provider reported by then, beside its error: the provider
	// billed it, and the failure is accounted with its tokens.
	Stream(ctx context.Context, req *Request, onDelta func(*generationv1.Delta) error) (*Response, error)
	// Embed returns one vector per input, in input order.
	Embed(ctx context.Context, model string, inputs []string) (*Embeddings, error)
}

// Request is one chat call to a provider.
type Request struct {
	// Model is the model to call.
	Model string
	// Messages is the canonical conversation, oldest first.
	Messages []*typev1.Message
	// Tools are the tools offered to the model.
	Tools []*typev1.Tool
	// ToolSchemas are the tools' input schemas as compact JSON, in the order of Tools, as the
	// service made them once for each distinct tool; a nil entry (or a nil slice) is rendered
	// from the tool itself.
	ToolSchemas []json.RawMessage
	// ToolChoice is "auto", "required", "none", a tool name, or "" for the provider default.
	ToolChoice string
	// Sampling holds the sampling parameters; unset fields are not sent.
	Sampling *generationv1.Sampling
}

// Response is a provider's answer before the protocol adapter turns it canonical.
type Response struct {
	// Model is the model that answered; "" means the requested one.
	Model string
	// Content is the answer text.
	Content string
	// Reasoning is the reasoning text, apart from the answer.
	Reasoning string
	// ReasoningState is opaque provider state of the reasoning to send back on the next turn
	// (the assistant message's reasoning_state), or nil.
	ReasoningState []byte
	// ToolCalls are the requested tool calls with their arguments as raw text.
	ToolCalls []ToolCall
	// FinishReason is normalised: stop, length, tool_calls or content_filter.
	FinishReason string
	// ContextFull says that the answer stopped because the model's context window filled up
	// (Anthropic's model_context_window_exceeded), not at the output token limit; its
	// FinishReason is length.
	ContextFull bool
	// Usage is the token usage the provider reported (or estimated).
	Usage Usage
}

// ToolCall is a tool call as the provider produced it.
type ToolCall struct {
	// ID is the provider's call identifier.
	ID string
	// Name is the tool name.
	Name string
	// Arguments is the raw argument text, not yet parsed.
	Arguments string
}

// Usage counts tokens of one call.
type Usage struct {
	// Input is prompt tokens.
	Input int64
	// Output is completion tokens.
	Output int64
	// Cached is prompt tokens served from the provider's cache.
	Cached int64
	// CacheWrite is prompt tokens written to the provider's cache (Anthropic's
	// cache_creation_input_tokens), which it bills at a price of their own; counted in Input
	// too, and not in the canonical usage.
	CacheWrite int64
	// Estimated says that Input or Output is the stage's estimate: the provider reported
	// none (estimate).
	Estimated bool
}

// Embeddings is the answer to an embedding call.
type Embeddings struct {
	// Model is the model that answered; "" means the requested one.
	Model string
	// Vectors holds one vector per input, in input order.
	Vectors [][]float32
	// Usage is the token usage.
	Usage Usage
}

// proto converts the usage to its wire form.
func (u Usage) proto() *typev1.TokenUsage {
	return &typev1.TokenUsage{Input: u.Input, Output: u.Output, Cached: u.Cached, Total: u.Input + u.Output, Estimated: u.Estimated}
}

// estimate fills in the counts the provider left at 0 (an OpenAI-compatible server may
// report no usage, or a stream may end before its usage chunk) with the estimate of pkg/tokens
// (about one token per four bytes): input, of the prompt, is prompt (the estimate of the messages
// sent) plus the estimate of the offered tools, and output is that of the answer's text,
// reasoning and tool calls. An answer that counted 0 tokens left its run without a token
// budget. Estimated marks a count filled in.
func (u *Usage) estimate(prompt int64, tools []*typev1.Tool, answer *Response) {
	if u.Input == 0 {
		u.Input, u.Estimated = prompt+tokens.Tools(tools), true
	}
	if u.Output == 0 {
		n := outputEstimate(answer)
		u.Output, u.Estimated = n, u.Estimated || n > 0
	}
}

// outputEstimate is the estimate of the tokens of an answer's text, reasoning and tool calls.
func outputEstimate(answer *Response) int64 {
	n := tokens.Estimate(answer.Content) + tokens.Estimate(answer.Reasoning)
	for _, c := range answer.ToolCalls {
		n += tokens.Estimate(c.Name) + tokens.Estimate(c.Arguments)
	}
	return n
}

// estimateBroken is estimate for an answer that broke off, of which answer is the part
// received: the output count the provider reported by then (Anthropic's message_start says 1)
// came before that part, so the larger of it and the estimate of the part is taken.
func (u *Usage) estimateBroken(prompt int64, tools []*typev1.Tool, answer *Response) {
	if outputEstimate(answer) > u.Output {
		u.Output = 0 // the estimate's, below
	}
	u.estimate(prompt, tools, answer)
}

// estimateInputs fills in the input count of an embeddings answer whose provider reported
// none with the estimate of pkg/tokens of the inputs embedded, as estimate does for a chat
// answer: an embedding request that counted 0 tokens looked free in its accounting entry.
func (u *Usage) estimateInputs(inputs []string) {
	if u.Input != 0 {
		return
	}
	for _, in := range inputs {
		u.Input += tokens.Estimate(in)
	}
	u.Estimated = u.Input > 0
}

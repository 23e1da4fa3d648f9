package llmtest

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Failure kinds a Turn can inject before it answers.
const (
	// FailModelError answers HTTP 500 with an OpenAI error body.
	FailModelError = "model_error"
	// FailNetworkError closes the connection without writing a response.
	FailNetworkError = "network_error"
	// FailTimeout holds the request until the client gives up or the server closes.
	FailTimeout = "timeout"
	// FailInvalidResponse answers HTTP 200 with a body that is not valid JSON.
	FailInvalidResponse = "invalid_response"
	// FailRateLimit answers HTTP 429 with Retry-After and retry-after-ms headers.
	FailRateLimit = "rate_limit"
	// FailAuthError answers HTTP 401.
	FailAuthError = "auth_error"
	// FailQuotaExceeded answers HTTP 429 with an OpenAI insufficient_quota error body, or
	// HTTP 400 with Anthropic's "credit balance is too low" error.
	FailQuotaExceeded = "quota_exceeded"
	// FailOverloaded answers HTTP 503 with an OpenAI "overloaded" server error, or HTTP 529
	// with Anthropic's overloaded_error.
	FailOverloaded = "overloaded"
	// FailBadRequest answers HTTP 400 with an invalid_request_error, as the APIs do for a
	// request they refuse (an unsupported parameter, a malformed tool schema).
	FailBadRequest = "bad_request"
	// FailContextLength answers HTTP 400 as the APIs refuse a request longer than the model's
	// context window: OpenAI's invalid_request_error context_length_exceeded, Anthropic's
	// "prompt is too long".
	FailContextLength = "context_length"
)

// How a Turn's StreamCut breaks a streamed answer off midway.
const (
	// CutDrop closes the connection, as a connection lost while the answer streams.
	CutDrop = "drop"
	// CutError sends an error event and ends the stream, as a provider that fails while
	// generating: OpenAI's {"error": ...} chunk of a server_error, Anthropic's error event of an
	// overloaded_error.
	CutError = "error"
)

// Scenario is a scripted conversation: the request whose first user message matches Match is
// answered by Turns[n], where n is the number of assistant messages the request already holds.
type Scenario struct {
	// Name identifies the scenario in error messages.
	Name string `yaml:"name" json:"name"`
	// Match selects the scenario: the exact first user message, or a prefix of it when Match
	// ends with "*" (so "*" alone matches every request).
	Match string `yaml:"match" json:"match"`
	// Turns are the scripted answers, one per assistant turn.
	Turns []Turn `yaml:"turns" json:"turns"`
}

// Turn is one scripted assistant answer, optionally preceded by injected failures.
type Turn struct {
	// Content is the answer text.
	Content string `yaml:"content,omitempty" json:"content,omitempty"`
	// Reasoning is sent as reasoning_content apart from the answer (OpenAI), or as a signed
	// thinking block (Anthropic).
	Reasoning string `yaml:"reasoning,omitempty" json:"reasoning,omitempty"`
	// ToolCalls are the tool calls of the answer.
	ToolCalls []ToolCall `yaml:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	// FinishReason defaults to "tool_calls" when there are tool calls and "stop" otherwise.
	// "length" (OpenAI) or "max_tokens" (Anthropic) says the answer was cut off at the output
	// token limit.
	FinishReason string `yaml:"finish_reason,omitempty" json:"finish_reason,omitempty"`
	// Model is the model the answer reports it came from, as providers report a dated
	// snapshot of a requested alias; "" reports the requested model.
	Model string `yaml:"model,omitempty" json:"model,omitempty"`
	// Usage is reported as given; nil estimates it at one token per four bytes.
	Usage *Usage `yaml:"usage,omitempty" json:"usage,omitempty"`
	// NoUsage leaves the usage out of an OpenAI answer, as some OpenAI-compatible servers
	// do: a completion without "usage", a stream without its usage chunk even when
	// stream_options.include_usage asks for it. Anthropic answers always report usage.
	NoUsage bool `yaml:"no_usage,omitempty" json:"no_usage,omitempty"`
	// FailuresBeforeSuccess is how many attempts of this turn get Failure before it answers.
	// When Failure is set and FailuresBeforeSuccess is 0, every attempt fails.
	FailuresBeforeSuccess int `yaml:"failures_before_success,omitempty" json:"failures_before_success,omitempty"`
	// Failure is one of the Fail* kinds.
	Failure string `yaml:"failure,omitempty" json:"failure,omitempty"`
	// RetryAfterMS is the retry delay a rate_limit failure advertises.
	RetryAfterMS int `yaml:"retry_after_ms,omitempty" json:"retry_after_ms,omitempty"`
	// DelayMS is how long each request of this turn waits before it is answered (or fails as
	// injected), e.g. to keep an inference in flight while a test kills the process that asked
	// for it. A client that gives up ends the wait; nothing is written then.
	DelayMS int `yaml:"delay_ms,omitempty" json:"delay_ms,omitempty"`
	// Hold, when set, keeps each request of this turn waiting after DelayMS until Hold is
	// closed, or the client gives up, so that a test decides when the turn is answered. It
	// cannot be written in YAML.
	Hold <-chan struct{} `yaml:"-" json:"-"`
	// Streaming, when set, is called once a streamed answer's first event is sent (OpenAI's
	// role delta, Anthropic's message_start), and the answer goes on when it returns: a model
	// that has begun its answer and takes its time, whose client has the response's headers
	// and waits on its body. It cannot be written in YAML.
	Streaming func() `yaml:"-" json:"-"`
	// Gzip compresses the answer (or injected failure) with gzip when the request accepts it,
	// as a provider behind a compressing proxy sends it; streamed events still arrive one by
	// one.
	Gzip bool `yaml:"gzip,omitempty" json:"gzip,omitempty"`
	// StreamCut, CutDrop or CutError, breaks a streamed answer off after the first half (at
	// least one) of its content's word deltas; nothing of the answer follows, nor the usage
	// the stream ends with. A non-streamed answer ignores it.
	StreamCut string `yaml:"stream_cut,omitempty" json:"stream_cut,omitempty"`
	// RateLimit, when set, is the headroom every response of this turn (answer or injected
	// failure) announces in its rate-limit headers.
	RateLimit *RateLimit `yaml:"rate_limit,omitempty" json:"rate_limit,omitempty"`
	// Refusal, on the OpenAI API, is the model's refusal: the answer's message.refusal
	// (streamed in delta.refusal fragments) beside content null, with finish_reason "stop"
	// unless FinishReason says otherwise, as OpenAI's models answer a request they decline.
	// Anthropic's refusal is FinishReason "refusal".
	Refusal string `yaml:"refusal,omitempty" json:"refusal,omitempty"`
	// Redirect, when set, answers each request of this turn with a redirect to it (its
	// Location) instead of an answer, as an API that moved, or a base_url naming a site that
	// redirects, answers; RedirectStatus is its status, 307 Temporary Redirect when 0.
	Redirect string `yaml:"redirect,omitempty" json:"redirect,omitempty"`
	// RedirectStatus is the status of a Redirect: 301, 302, 303, 307 or 308.
	RedirectStatus int `yaml:"redirect_status,omitempty" json:"redirect_status,omitempty"`
	// Expect checks what the request of this turn carried; mismatches are recorded as errors.
	Expect *Expect `yaml:"expect,omitempty" json:"expect,omitempty"`
	// Respond, when set, writes the answer from the request, for answers that depend on what
	// the request carries (e.g. a nonce it announces, or a notice sent with a retry): its
	// Content, Reasoning, ToolCalls, FinishReason and Usage are the answer, in place of this
	// turn's. attempt counts the requests of this turn from 1. Injected failures still come
	// first. It cannot be written in YAML.
	Respond func(req Request, attempt int) Turn `yaml:"-" json:"-"`
}

// ToolCall is a scripted tool call.
type ToolCall struct {
	// ID defaults to "call_<turn>_<n>" (OpenAI) or "toolu_<turn>_<n>" (Anthropic).
	ID string `yaml:"id,omitempty" json:"id,omitempty"`
	// Name is the tool name.
	Name string `yaml:"name" json:"name"`
	// Arguments is the raw JSON text of the arguments, sent as is (it may be malformed on
	// purpose). An Anthropic JSON answer carries it as the input object when it is one, else
	// as a JSON string; streamed, it is sent as is in input_json_delta fragments.
	Arguments string `yaml:"arguments,omitempty" json:"arguments,omitempty"`
}

// Usage is the token usage a turn reports.
type Usage struct {
	// PromptTokens is usage.prompt_tokens; Anthropic answers send it less CachedTokens as
	// input_tokens.
	PromptTokens int `yaml:"prompt_tokens" json:"prompt_tokens"`
	// CompletionTokens is usage.completion_tokens.
	CompletionTokens int `yaml:"completion_tokens" json:"completion_tokens"`
	// CachedTokens is usage.prompt_tokens_details.cached_tokens, or Anthropic's
	// cache_read_input_tokens.
	CachedTokens int `yaml:"cached_tokens,omitempty" json:"cached_tokens,omitempty"`
	// CacheWriteTokens, of PromptTokens, are Anthropic's cache_creation_input_tokens (sent less
	// from input_tokens); OpenAI answers report no cache writes.
	CacheWriteTokens int `yaml:"cache_write_tokens,omitempty" json:"cache_write_tokens,omitempty"`
}

// Expect is what a turn's request must carry. Nil fields are not checked.
type Expect struct {
	// Tools is the exact set of tool names offered, in any order; an empty non-nil list
	// expects no tools.
	Tools []string `yaml:"tools,omitempty" json:"tools,omitempty"`
	// Temperature must be present and equal.
	Temperature *float64 `yaml:"temperature,omitempty" json:"temperature,omitempty"`
	// TopP must be present and equal.
	TopP *float64 `yaml:"top_p,omitempty" json:"top_p,omitempty"`
	// ToolChoice must equal the request's tool_choice ("auto", "none", "required", or the
	// function name of a named choice; Anthropic's "any" reads as "required").
	ToolChoice string `yaml:"tool_choice,omitempty" json:"tool_choice,omitempty"`
	// MaxTokens must be present and equal to max_tokens.
	MaxTokens *int `yaml:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	// MaxCompletionTokens must be present and equal to max_completion_tokens (OpenAI).
	MaxCompletionTokens *int `yaml:"max_completion_tokens,omitempty" json:"max_completion_tokens,omitempty"`
	// ReasoningEffort must equal reasoning_effort (OpenAI).
	ReasoningEffort string `yaml:"reasoning_effort,omitempty" json:"reasoning_effort,omitempty"`
	// ThinkingBudget must equal thinking.budget_tokens, with thinking enabled (Anthropic).
	ThinkingBudget *int `yaml:"thinking_budget,omitempty" json:"thinking_budget,omitempty"`
	// Stop must equal the stop sequences (stop, or Anthropic's stop_sequences); an empty
	// non-nil list expects none.
	Stop []string `yaml:"stop,omitempty" json:"stop,omitempty"`
}

// Load reads scenarios from a YAML (or JSON) file holding a list of scenarios.
func Load(path string) ([]Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var scenarios []Scenario
	if err := yaml.Unmarshal(data, &scenarios); err != nil {
		return nil, fmt.Errorf("llmtest: %s: %w", path, err)
	}
	return scenarios, nil
}

// matches reports whether the scenario selects a conversation whose first user message is
// first, and whether it did so exactly.
func (sc Scenario) matches(first string) (ok, exact bool) {
	if prefix, isPrefix := strings.CutSuffix(sc.Match, "*"); isPrefix {
		return strings.HasPrefix(first, prefix), false
	}
	return sc.Match == first, sc.Match == first
}

// finishReason is the turn's finish_reason with its default.
func (t Turn) finishReason() string {
	switch {
	case t.FinishReason != "":
		return t.FinishReason
	case len(t.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

// failing reports whether attempt (1-based) of this turn must fail.
func (t Turn) failing(attempt int) bool {
	if t.Failure == "" {
		return false
	}
	return t.FailuresBeforeSuccess == 0 || attempt <= t.FailuresBeforeSuccess
}

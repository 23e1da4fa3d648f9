package generation

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
)

// Defaults of OpenAIOptions.
const (
	// DefaultOpenAIBaseURL is the OpenAI API root.
	DefaultOpenAIBaseURL = "https://api.openai.com/v1"
	// DefaultMaxRetries is how often a call is retried after a connection error or a 5xx.
	DefaultMaxRetries = 2
	// DefaultTimeout bounds one whole call.
	DefaultTimeout = 5 * time.Minute
	// DefaultRetryWaitMin is the first backoff between retries.
	DefaultRetryWaitMin = 500 * time.Millisecond
	// DefaultRetryWaitMax caps the backoff and any Retry-After wait.
	DefaultRetryWaitMax = 30 * time.Second
)

// maxResponseBytes bounds how much of a non-streamed response is read.
const maxResponseBytes = 32 << 20

// OpenAIOptions configures an OpenAI-compatible provider.
type OpenAIOptions struct {
	// Name is the provider name reported in spans and errors; "" means "openai".
	Name string
	// BaseURL is the API root, e.g. "http://localhost:11434/v1"; "" means DefaultOpenAIBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when set.
	APIKey string
	// Headers are added to every request.
	Headers map[string]string
	// Timeout bounds one whole call, retries and streaming included; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is how often connection errors and 5xx answers are retried; 0 means
	// DefaultMaxRetries and a negative value disables retries.
	MaxRetries int
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between retries (a
	// Retry-After header wins, capped at RetryWaitMax); 0 means the defaults.
	RetryWaitMin, RetryWaitMax time.Duration
	// HTTPClient sends the requests; nil means a pooled client without a timeout of its own.
	HTTPClient *http.Client
}

// openAI is a provider speaking the OpenAI chat completions API, which OpenAI, Ollama, vLLM,
// llama.cpp server, LM Studio and OpenRouter all serve.
type openAI struct {
	name    string
	baseURL string
	apiKey  string
	headers map[string]string
	timeout time.Duration
	client  *retryablehttp.Client
}

// NewOpenAI returns a provider for an OpenAI-compatible chat completions API. Requests go
// through go-retryablehttp: connection errors and 5xx answers are retried with jittered
// exponential backoff honouring Retry-After; 429 and other 4xx answers are not retried.
func NewOpenAI(opts OpenAIOptions) Provider {
	o := &openAI{
		name:    cmp.Or(opts.Name, "openai"),
		baseURL: strings.TrimRight(cmp.Or(opts.BaseURL, DefaultOpenAIBaseURL), "/"),
		apiKey:  opts.APIKey,
		headers: opts.Headers,
		timeout: opts.Timeout,
	}
	if o.timeout <= 0 {
		o.timeout = DefaultTimeout
	}
	retries := opts.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = cleanhttp.DefaultPooledClient()
	}
	o.client = &retryablehttp.Client{
		HTTPClient:   hc,
		Logger:       slog.Default(),
		RetryWaitMin: cmp.Or(opts.RetryWaitMin, DefaultRetryWaitMin),
		RetryWaitMax: cmp.Or(opts.RetryWaitMax, DefaultRetryWaitMax),
		RetryMax:     retries,
		CheckRetry:   retryPolicy,
		Backoff:      backoff,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	return o
}

// Name returns the configured provider name.
func (o *openAI) Name() string { return o.name }

// Complete makes one non-streamed chat completion.
func (o *openAI) Complete(ctx context.Context, req *Request) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	resp, err := o.post(ctx, "/chat/completions", buildChatRequest(req, false), false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, o.transportError(ctx, err)
	}
	return o.parseCompletion(body)
}

// parseCompletion decodes a non-streamed chat completion.
func (o *openAI) parseCompletion(body []byte) (*Response, error) {
	var cr chatResponse
	if err := json.Unmarshal(body, &cr); err != nil {
		return nil, o.badResponse("the chat completion is not valid JSON (%v): %s", err, snippet(body))
	}
	if len(cr.Choices) == 0 {
		return nil, o.badResponse("the chat completion has no choices: %s", snippet(body))
	}
	ch := cr.Choices[0]
	out := &Response{
		Model:     cr.Model,
		Content:   string(ch.Message.Content),
		Reasoning: ch.Message.reasoning(),
		Usage:     cr.Usage.usage(),
	}
	for _, c := range ch.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	out.FinishReason = normaliseFinish(ch.FinishReason, len(out.ToolCalls) > 0)
	return out, nil
}

// Embed calls POST {base}/embeddings.
func (o *openAI) Embed(ctx context.Context, model string, inputs []string) (*Embeddings, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	resp, err := o.post(ctx, "/embeddings", embeddingsRequest{Model: model, Input: inputs}, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, o.transportError(ctx, err)
	}
	var er embeddingsResponse
	if err := json.Unmarshal(body, &er); err != nil {
		return nil, o.badResponse("the embeddings answer is not valid JSON (%v): %s", err, snippet(body))
	}
	if len(er.Data) != len(inputs) {
		return nil, o.badResponse("%d embeddings for %d inputs", len(er.Data), len(inputs))
	}
	sort.SliceStable(er.Data, func(i, j int) bool { return er.Data[i].Index < er.Data[j].Index })
	out := &Embeddings{Model: er.Model, Usage: er.Usage.usage()}
	for _, d := range er.Data {
		out.Vectors = append(out.Vectors, d.Embedding)
	}
	return out, nil
}

// post sends body as JSON and returns a 2xx response; anything else becomes a classified
// stage error.
func (o *openAI) post(ctx context.Context, path string, body any, stream bool) (*http.Response, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, stageerr.Invalid("%s: cannot encode the request: %v", o.name, err)
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, o.baseURL+path, data)
	if err != nil {
		return nil, stageerr.Invalid("%s: bad base URL %q: %v", o.name, o.baseURL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if o.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.apiKey)
	}
	for k, v := range o.headers {
		req.Header.Set(k, v)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		return nil, o.transportError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, o.statusError(resp)
	}
	return resp, nil
}

// retryPolicy retries connection errors and 5xx answers (but not 501), never 429 or other
// 4xx, and stops when the context is done.
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	return resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented, nil
}

// backoff waits what the server's Retry-After asks (capped at max), else min·2^attempt with
// jitter, capped at max.
func backoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if d, ok := retryAfter(resp.Header, time.Now()); ok {
			return min(d, maxWait)
		}
	}
	wait := minWait << min(attempt, 30)
	if wait <= 0 || wait > maxWait {
		wait = maxWait
	}
	half := wait / 2
	return half + rand.N(half+1)
}

// badResponse is a BAD_RESPONSE failure.
func (o *openAI) badResponse(format string, args ...any) error {
	return stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, 0, "%s: %s", o.name, o.redact(fmt.Sprintf(format, args...)))
}

// redact removes the API key from text.
func (o *openAI) redact(text string) string {
	if o.apiKey == "" {
		return text
	}
	return strings.ReplaceAll(text, o.apiKey, "[redacted]")
}

// snippet is the start of a body for an error message.
func snippet(body []byte) string {
	const limit = 200
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "(empty body)"
	}
	return truncate(s, limit)
}

// normaliseFinish maps provider finish reasons to stop, length, tool_calls or
// content_filter.
func normaliseFinish(reason string, hasToolCalls bool) string {
	switch strings.ToLower(reason) {
	case "length", "max_tokens", "max_output_tokens":
		return "length"
	case "content_filter", "safety", "refusal":
		return "content_filter"
	case "tool_calls", "function_call", "tool_use":
		return "tool_calls"
	}
	if hasToolCalls {
		return "tool_calls"
	}
	return "stop"
}

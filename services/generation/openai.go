package generation

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"
)

// DefaultOpenAIBaseURL is the OpenAI API root.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

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
	// DefaultMaxRetries (none) and a negative value disables retries.
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
	*endpoint
}

// NewOpenAI returns a provider for an OpenAI-compatible chat completions API. Requests go
// through go-retryablehttp, which retries nothing unless MaxRetries asks it to (the
// orchestrator's accounted attempts are the retries): then connection errors and 5xx answers
// are retried with jittered exponential backoff honouring Retry-After; 429 and other 4xx
// answers never are.
func NewOpenAI(opts OpenAIOptions) Provider {
	var fixed http.Header
	if opts.APIKey != "" {
		fixed = http.Header{"Authorization": {"Bearer " + opts.APIKey}}
	}
	return &openAI{endpoint: newEndpoint(endpointOptions{
		name:       cmp.Or(opts.Name, "openai"),
		baseURL:    cmp.Or(opts.BaseURL, DefaultOpenAIBaseURL),
		apiKey:     opts.APIKey,
		fixed:      fixed,
		headers:    opts.Headers,
		timeout:    opts.Timeout,
		maxRetries: opts.MaxRetries,
		waitMin:    opts.RetryWaitMin,
		waitMax:    opts.RetryWaitMax,
		httpClient: opts.HTTPClient,
	})}
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
	body, err := o.readAll(ctx, resp)
	if err != nil {
		return nil, err
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
	body, err := o.readAll(ctx, resp)
	if err != nil {
		return nil, err
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

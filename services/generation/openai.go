package generation

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// DefaultOpenAIBaseURL is the OpenAI API root.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// OpenAIOptions configures an OpenAI-compatible provider.
type OpenAIOptions struct {
	// Name is the provider name reported in spans and errors; "" means "openai".
	Name string
	// BaseURL is the API root, e.g. "http://localhost:11434/v1"; "" means DefaultOpenAIBaseURL.
	// Failures that name it mask its password, if any.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when set.
	APIKey string
	// Headers are added to every request.
	Headers map[string]string
	// Timeout bounds one whole call, retries and streaming included; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is how often connection errors and 5xx, 408 and 409 answers are retried; 0
	// means DefaultMaxRetries (none) and a negative value disables retries.
	MaxRetries int
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between retries (a
	// Retry-After header wins, capped at RetryWaitMax); 0 means the defaults.
	RetryWaitMin, RetryWaitMax time.Duration
	// HTTPClient sends the requests; nil means a pooled client without a timeout of its own
	// that keeps up to 256 idle connections to the provider. Either follows no redirect (a
	// copy of the client is used, its CheckRedirect replaced).
	HTTPClient *http.Client
	// TokenLimitField names the request field that carries max_output_tokens: "" chooses by
	// model (max_completion_tokens for the OpenAI reasoning models, max_tokens for the
	// others); MaxTokensField or MaxCompletionTokensField forces one for every model, e.g.
	// max_tokens for an OpenAI-compatible server that knows no other.
	TokenLimitField string
}

// The request fields an OpenAI-compatible API takes the output token limit in.
const (
	// MaxTokensField is the original field, the only one many OpenAI-compatible servers
	// (Ollama, llama.cpp, older vLLM) know.
	MaxTokensField = "max_tokens"
	// MaxCompletionTokensField replaces it on OpenAI's API, where the reasoning models (o1, o3,
	// o4-mini, the gpt-5 family) refuse max_tokens with HTTP 400.
	MaxCompletionTokensField = "max_completion_tokens"
)

// reasoningModel matches the OpenAI reasoning models, after any vendor prefix ("openai/o3"
// on OpenRouter): o1, o3, o4-mini and their snapshots, and the gpt-5 family.
var reasoningModel = regexp.MustCompile(`^(o[1-9][0-9]*(-|$)|gpt-5)`)

// limitFieldFor is the field that carries the output token limit for model when the provider
// does not force one: max_completion_tokens for the OpenAI reasoning models, which refuse
// max_tokens, and max_tokens for every other model, which OpenAI still accepts and which
// every OpenAI-compatible server knows.
func limitFieldFor(model string) string {
	if isReasoningModel(model) {
		return MaxCompletionTokensField
	}
	return MaxTokensField
}

// isReasoningModel reports whether model is one of OpenAI's reasoning models (reasoningModel).
func isReasoningModel(model string) bool {
	return reasoningModel.MatchString(strings.ToLower(model[strings.LastIndex(model, "/")+1:]))
}

// openAI is a provider speaking the OpenAI chat completions API, which OpenAI, Ollama, vLLM,
// llama.cpp server, LM Studio and OpenRouter all serve.
//
// Its wire types (openai_wire.go) are kept by hand rather than taken from the official
// github.com/openai/openai-go client: that module's go.mod brings the Azure and AWS SDKs into
// the build graph, its request parameters are OpenAI's schema only (param.Opt and union
// wrappers), and what the other servers add — reasoning_content or reasoning beside the
// answer, content as an array of parts — would have to be dug out of its ExtraFields. The
// fields used here are few, and llmtest checks them against the API's behaviour.
type openAI struct {
	*endpoint
	limitField string
}

// NewOpenAI returns a provider for an OpenAI-compatible chat completions API. Requests go
// through go-retryablehttp, which retries nothing unless MaxRetries asks it to (the
// orchestrator's accounted attempts are the retries): then connection errors and 5xx, 408 and
// 409 answers are retried with jittered exponential backoff honouring Retry-After; 429 and
// other 4xx answers never are.
func NewOpenAI(opts OpenAIOptions) Provider {
	var fixed http.Header
	if opts.APIKey != "" {
		fixed = http.Header{"Authorization": {"Bearer " + opts.APIKey}}
	}
	return &openAI{limitField: opts.TokenLimitField, endpoint: newEndpoint(endpointOptions{
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
	ctx, cancel := o.withTimeout(ctx)
	defer cancel()
	resp, err := o.post(ctx, "/chat/completions", o.chatRequest(req, false), false)
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

// chatRequest is the wire form of req, its output token limit in the configured field, else
// in the model's.
func (o *openAI) chatRequest(req *Request, stream bool) *chatRequest {
	return buildChatRequest(req, stream, cmp.Or(o.limitField, limitFieldFor(req.Model)))
}

// parseCompletion decodes a non-streamed chat completion. An answer that failed while the
// model generated it (finish_reason "error") is returned, with its usage, beside its failure:
// the provider billed it (Provider.Complete). A refusal (message.refusal) is the answer's
// content, with stop reason content_filter, as Anthropic's refusal is.
func (o *openAI) parseCompletion(body []byte) (*Response, error) {
	var cr chatResponse
	if err := json.Unmarshal(body, &cr); err != nil {
		return nil, o.badResponse("the chat completion is not valid JSON (%v): %s", err, snippet(body))
	}
	if cr.Error != nil && len(cr.Choices) == 0 {
		return nil, o.errorIn("in the answer", *cr.Error)
	}
	if len(cr.Choices) == 0 {
		return nil, o.badResponse("the chat completion has no choices: %s", snippet(body))
	}
	ch := cr.Choices[0]
	out := &Response{
		Model:     cr.Model,
		Content:   string(ch.Message.Content) + ch.Message.Refusal,
		Reasoning: ch.Message.reasoning(),
		Usage:     cr.Usage.usage(),
	}
	for _, c := range ch.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	out.FinishReason = normaliseFinish(ch.FinishReason, len(out.ToolCalls) > 0)
	if ch.Message.Refusal != "" {
		out.FinishReason = stopContentFilter
	}
	out.ContextFull = contextFull(ch.FinishReason)
	if ch.FinishReason == "error" && cr.Error != nil {
		return out, o.errorIn("in the answer", *cr.Error)
	}
	if err := o.finishError(ch.FinishReason); err != nil {
		return out, err
	}
	return out, nil
}

// finishError is the failure of an answer whose finish_reason is "error", which OpenRouter and
// vLLM report when the model failed part way through the answer; nil for any other reason.
// What came before it is not the whole answer, so it is a SERVER failure, not an answer.
func (o *openAI) finishError(reason string) error {
	if reason != "error" {
		return nil
	}
	return stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_SERVER, 0,
		"%s: the answer ended with finish_reason %q: the provider failed while generating it", o.name, reason)
}

// errorIn classifies the error object an answer carries (its "error" field), where says
// where: OpenRouter answers 200 and sends the error in the body, or as a stream event, once the
// model has started.
func (o *openAI) errorIn(where string, raw json.RawMessage) error {
	return o.answerError(where, parseErrorBody(append(append([]byte(`{"error":`), raw...), '}')), raw)
}

// Embed calls POST {base}/embeddings. Each vector goes to the input its index names; an
// answer whose indices do not name each input once is BAD_RESPONSE, and one whose vectors
// carry none (all 0: servers that omit it) is taken in the order it has.
func (o *openAI) Embed(ctx context.Context, model string, inputs []string) (*Embeddings, error) {
	ctx, cancel := o.withTimeout(ctx)
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
	if n := len(er.Data); n > 0 && er.Data[n-1].Index != 0 {
		for i, d := range er.Data {
			if d.Index != i {
				return nil, o.badResponse("the embeddings' indices do not name each of the %d inputs "+
					"once (index %d is missing)", len(inputs), i)
			}
		}
	}
	out := &Embeddings{Model: er.Model, Usage: er.Usage.usage()}
	for _, d := range er.Data {
		out.Vectors = append(out.Vectors, d.Embedding)
	}
	return out, nil
}

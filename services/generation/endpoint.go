package generation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/retryafter"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"
)

// Defaults shared by the HTTP providers.
const (
	// DefaultMaxRetries is how often a call is retried after a connection error or a 5xx:
	// never. An LLM request costs money and is not idempotent, and one accounted attempt must
	// be one provider request (seed 000 §1): the orchestrator's attempts (max_retries, round
	// robin over the targets, backoffs decided by the recovery stage) are the retries.
	DefaultMaxRetries = 0
	// DefaultTimeout bounds one whole call.
	DefaultTimeout = 5 * time.Minute
	// DefaultRetryWaitMin is the first backoff between retries.
	DefaultRetryWaitMin = 500 * time.Millisecond
	// DefaultRetryWaitMax caps the backoff and any Retry-After wait.
	DefaultRetryWaitMax = 30 * time.Second
)

// idleConnsPerHost is how many idle connections to its provider an endpoint keeps for
// reuse. Over HTTP/1.1 (local model servers) every request in flight holds a connection of
// its own; with the default of GOMAXPROCS+1, runs beyond that many at once would close and
// dial connections on every request.
const idleConnsPerHost = 256

// maxResponseBytes bounds how much of a non-streamed response is read.
const maxResponseBytes = 32 << 20

// endpoint is the HTTP side of a provider: the API root, authentication, retries through
// go-retryablehttp, and the classification of failures into error classes.
type endpoint struct {
	name    string
	baseURL string
	// shownURL is baseURL as failures name it, its password (a proxy's basic authentication)
	// masked (maskedURL).
	shownURL string
	// secrets are what failures never quote (redact): the API key and the credentials of the
	// configured headers (credentials).
	secrets []string
	// streamHeader and jsonHeader are the headers of every request that streams its answer
	// and of every other: one map each, shared by all the requests of the endpoint, which
	// nothing changes (net/http copies a request's headers before it adds to them). A request
	// building its own held some 0.4 KiB for as long as the model took (issue 15).
	streamHeader, jsonHeader http.Header
	// releaseSent releases a request's body once it is written (requestBody): nothing sends it
	// again when the API is plain HTTP, which net/http speaks as HTTP/1.1, and go-retryablehttp
	// makes no retries.
	releaseSent bool
	timeout     time.Duration
	client      *retryablehttp.Client
}

// endpointOptions configures an endpoint; zero values mean the defaults.
type endpointOptions struct {
	name, baseURL, apiKey string
	fixed                 http.Header
	headers               map[string]string
	timeout               time.Duration
	maxRetries            int
	waitMin, waitMax      time.Duration
	httpClient            *http.Client
}

// newEndpoint builds an endpoint: connection errors, 5xx, 408 and 409 answers are retried
// with jittered exponential backoff honouring Retry-After; 429 and other 4xx answers are not.
func newEndpoint(o endpointOptions) *endpoint {
	e := &endpoint{
		name:         o.name,
		baseURL:      strings.TrimRight(o.baseURL, "/"),
		secrets:      credentials(o.apiKey, o.headers),
		streamHeader: requestHeader("text/event-stream", o.fixed, o.headers),
		jsonHeader:   requestHeader("application/json", o.fixed, o.headers),
		timeout:      o.timeout,
	}
	e.shownURL = maskedURL(e.baseURL)
	if e.timeout <= 0 {
		e.timeout = DefaultTimeout
	}
	retries := o.maxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	hc := pooledClient()
	if o.httpClient != nil {
		own := *o.httpClient // the caller's client is left as it is
		hc = &own
	}
	hc.CheckRedirect = refuseRedirect
	e.releaseSent = retries == 0 && strings.HasPrefix(strings.ToLower(e.baseURL), "http://")
	e.client = &retryablehttp.Client{
		HTTPClient:   hc,
		Logger:       slog.Default(),
		RetryWaitMin: cmp.Or(o.waitMin, DefaultRetryWaitMin),
		RetryWaitMax: cmp.Or(o.waitMax, DefaultRetryWaitMax),
		RetryMax:     retries,
		CheckRetry:   retryPolicy,
		Backoff:      backoff,
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	return e
}

// requestHeader is the header of a request that sends JSON and accepts accept (and
// acceptEncoding), with fixed (authentication and version) and then the configured headers
// over it.
func requestHeader(accept string, fixed http.Header, headers map[string]string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {accept}, "Accept-Encoding": {acceptEncoding}}
	for k, vs := range fixed {
		h[k] = vs
	}
	for k, v := range headers {
		h.Set(k, v)
	}
	return h
}

// pooledClient is the HTTP client of an endpoint without one of its own: go-cleanhttp's
// pooled client, which keeps idleConnsPerHost idle connections to the provider, with buffers
// of connBufferSize.
func pooledClient() *http.Client {
	t := cleanhttp.DefaultPooledTransport()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = idleConnsPerHost, idleConnsPerHost
	t.ReadBufferSize, t.WriteBufferSize = connBufferSize, connBufferSize
	return &http.Client{Transport: t}
}

// refuseRedirect makes a redirect the answer (statusError reports it): an LLM API does not
// redirect its POSTs, and following one would send the request's headers, with the API key
// of a provider that takes it in a header of its own (Anthropic's x-api-key, a configured
// header), to whatever host the redirect names, and turn the request into a GET without its
// body.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// connBufferSize is the size of the read and of the write buffer of an HTTP/1.1 connection to
// a provider, an eighth of net/http's 4 KiB. Over HTTP/1.1 (a local model server) every
// request in flight has a connection of its own, which holds both buffers for as long as the
// model takes. Little passes through them: a request's headers (some 300 bytes), a response's
// headers and the start of its body; reads and writes larger than a buffer go past it to the
// connection, and a longer header takes one more read or write, not an error.
const connBufferSize = 1 << 9

// post sends body as JSON and returns a 2xx response; anything else becomes a classified
// stage error. The rate-limit headroom the response announces, if any, goes to the observer
// of ctx (withRateLimits).
func (e *endpoint) post(ctx context.Context, path string, body any, stream bool) (*http.Response, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, stageerr.Invalid("%s: cannot encode the request: %v", e.name, err)
	}
	return e.send(ctx, path, data, stream)
}

// send posts data, a request's JSON, as post does. Nothing keeps data once the response is in,
// nor once it is written when nothing would send it again (releaseSent).
func (e *endpoint) send(ctx context.Context, path string, data []byte, stream bool) (*http.Response, error) {
	body := &requestBody{data: data, releaseSent: e.releaseSent}
	defer body.release()
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, e.baseURL+path, retryablehttp.ReaderFunc(body.reader))
	if err != nil {
		if uerr, ok := errors.AsType[*url.Error](err); ok {
			err = uerr.Err // its message quotes the URL whole
		}
		return nil, stageerr.Invalid("%s: bad base URL %s: %v", e.name, e.shownURL, err)
	}
	req.Header = e.jsonHeader
	if stream {
		req.Header = e.streamHeader
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		return nil, e.transportError(ctx, err)
	}
	encoding := decodeBody(resp)
	observeRateLimits(ctx, resp.Header)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, e.statusError(resp)
	}
	if encoding != "" {
		_ = resp.Body.Close()
		return nil, e.badResponse("the answer is compressed with %q; only gzip is decoded (see the configured Accept-Encoding header)", encoding)
	}
	return resp, nil
}

// Bounds of the draining of a finished stream (closeStream).
const (
	drainBytes = 4 << 10
	drainWait  = 100 * time.Millisecond
)

// closeStream closes the body of a streamed response. What is left of it (usually only the
// end of the chunked encoding, which the server writes just after the last event) is read
// first, up to drainBytes and for at most drainWait, so that the connection goes back to the
// pool: closing a body before its end closes the connection, and the next request would dial
// a new one. cancel ends the request's context, which stops a server that holds the response
// open.
func closeStream(body io.ReadCloser, cancel context.CancelFunc) {
	stop := time.AfterFunc(drainWait, cancel)
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainBytes))
	stop.Stop()
	_ = body.Close()
}

// readAll reads a non-streamed response body, up to maxResponseBytes: a longer one is
// BAD_RESPONSE that says so (cut at the limit, it was refused as JSON that breaks off), as is
// a body that is not the gzip it says (decodeFailure); another failure to read it is a
// transport one.
func (e *endpoint) readAll(ctx context.Context, resp *http.Response) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if derr := e.decodeFailure(err); derr != nil {
		return nil, derr
	}
	switch {
	case err != nil:
		return nil, e.transportError(ctx, err)
	case len(body) > maxResponseBytes:
		return nil, e.badResponse("the answer is larger than %d bytes", maxResponseBytes)
	}
	return body, nil
}

// retryPolicy retries connection errors, 5xx answers (but not 501), 408 and 409 (transient,
// classify), never 429 or other 4xx, and stops when the context is done.
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	}
	code := resp.StatusCode
	return code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code >= 500 && code != http.StatusNotImplemented, nil
}

// backoff waits what the server's Retry-After asks (capped at max), else min·2^attempt with
// jitter, capped at max.
func backoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if d, ok := retryafter.Parse(resp.Header, time.Now()); ok {
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
func (e *endpoint) badResponse(format string, args ...any) error {
	return stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, 0, "%s: %s", e.name, e.redact(fmt.Sprintf(format, args...)))
}

// maskedURL is raw with the password of its user information, if any, masked (url.Redacted:
// "user:xxxxx@"); all of the user information of a URL that does not parse.
func maskedURL(raw string) string {
	u, err := url.Parse(raw)
	if err == nil {
		return u.Redacted()
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
		return scheme + "://***" + rest[at:]
	}
	return raw
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

// stopContentFilter is the stop reason of an answer the provider's content filter withheld or
// stopped (normaliseFinish), which the response cache does not keep (cacheable).
const stopContentFilter = "content_filter"

// stopContextWindow is the stop reason of an answer stopped because the model's context
// window filled up (Anthropic's, which OpenAI-compatible proxies pass on): length, with
// Response.ContextFull.
const stopContextWindow = "model_context_window_exceeded"

// contextFull reports whether a provider's stop reason says the context window filled up.
func contextFull(reason string) bool { return strings.EqualFold(reason, stopContextWindow) }

// normaliseFinish maps provider stop reasons to stop, length, tool_calls or content_filter:
// OpenAI's length, tool_calls and content_filter, Anthropic's max_tokens, tool_use and
// refusal; end_turn, stop_sequence, pause_turn and anything else are stop (tool_calls when
// the answer has tool calls).
func normaliseFinish(reason string, hasToolCalls bool) string {
	switch strings.ToLower(reason) {
	case "length", "max_tokens", "max_output_tokens", stopContextWindow:
		return "length"
	case stopContentFilter, "safety", "refusal":
		return stopContentFilter
	case "tool_calls", "function_call", "tool_use":
		return "tool_calls"
	}
	if hasToolCalls {
		return "tool_calls"
	}
	return "stop"
}

package generation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/retryafter"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// maxErrorBytes bounds how much of an error body is read.
const maxErrorBytes = 64 << 10

// providerMessage is what an error body says.
type providerMessage struct {
	message string
	typ     string
	code    string
}

// quota reports whether the body says the account is out of quota or credit: OpenAI's
// insufficient_quota, Anthropic's billing_error, its enforced_spend_limit_reached rate limit
// and its "credit balance is too low" request error.
func (pm providerMessage) quota() bool {
	return pm.code == "insufficient_quota" || pm.typ == "insufficient_quota" || pm.typ == "billing_error" ||
		pm.code == "enforced_spend_limit_reached" || strings.Contains(strings.ToLower(pm.message), "credit balance is too low")
}

// contextOverflowWords are what providers' refusals of a request longer than the model's
// context window say, lower case: OpenAI's and vLLM's "maximum context length", Anthropic's
// "prompt is too long", OpenAI's Responses API's "exceeds the context window", llama.cpp's
// "exceeds the available context size".
var contextOverflowWords = []string{"maximum context length", "prompt is too long",
	"exceeds the context window", "exceeds the available context size"}

// contextOverflow reports whether the body refuses the request as longer than the model's
// context window: OpenAI's context_length_exceeded, llama.cpp's exceed_context_size_error, or
// a message of contextOverflowWords.
func (pm providerMessage) contextOverflow() bool {
	if pm.code == "context_length_exceeded" || pm.typ == "exceed_context_size_error" {
		return true
	}
	msg := strings.ToLower(pm.message)
	for _, w := range contextOverflowWords {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// statusError classifies a non-2xx answer (classify), with the advertised retry delay of a
// rate limit or a server error; a redirect, which the endpoint does not follow
// (refuseRedirect), says where it points (redirected).
func (e *endpoint) statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	pm := parseErrorBody(body)
	status := resp.StatusCode
	class, what := classify(status, pm)
	var wait time.Duration
	if class == typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED || class == typev1.ErrorClass_ERROR_CLASS_SERVER {
		wait, _ = retryafter.Parse(resp.Header, time.Now())
	}
	detail := pm.message
	if detail == "" {
		detail = snippet(body)
	}
	msg := fmt.Sprintf("%s: %s (HTTP %d %s): %s", e.name, what, status, statusText(status), truncate(detail, 500))
	if isRedirect(status) {
		msg = e.redirected(resp)
	}
	if wait > 0 {
		msg += fmt.Sprintf("; retry after %s", wait)
	}
	return stageerr.Generation(class, wait, "%s", e.redact(msg))
}

// isRedirect reports whether status is a redirect (3xx).
func isRedirect(status int) bool { return status >= 300 && status <= 399 }

// redirected is the message of a redirect: its status, where it points (resolved against the
// request's URL, its password masked), that it is not followed, and the base_url to configure
// instead: where it points without the API's path when it ends with that path (a moved API,
// an http:// base_url answered by its https:// address), else the API's address.
func (e *endpoint) redirected(resp *http.Response) string {
	where := resp.Header.Get("Location")
	if u, err := resp.Location(); err == nil {
		where = u.String()
	}
	instead := "the API's address"
	if resp.Request != nil {
		path, ok := strings.CutPrefix(resp.Request.URL.String(), e.baseURL)
		if base, found := strings.CutSuffix(where, path); ok && found && path != "" && base != "" {
			instead = maskedURL(base)
		}
	}
	if where == "" {
		where = "no Location"
	}
	return e.redact(fmt.Sprintf("%s: %s redirects to %s (HTTP %d %s), which is not followed "+
		"(it would carry the API key there): set providers.%s.base_url to %s", e.name, e.shownURL,
		maskedURL(where), resp.StatusCode, statusText(resp.StatusCode), e.name, instead))
}

// classify is the class of a failure answered with an HTTP status, and what it is in words,
// as the OpenAI and Anthropic SDKs retry (408, 409, 429 and 5xx) or do not (every other
// 4xx): 401/403 AUTH; 402 or a quota body QUOTA (even under 400 or 429); other 429
// RATE_LIMITED; 408 (the provider gave up waiting for the request) TIMEOUT and 409 (a
// conflict with a request in progress, which passes) SERVER, both retryable; 5xx (including
// Anthropic's 529 overloaded) SERVER; a refusal of a request longer than the model's context
// window (contextOverflow) CONTEXT_OVERFLOW; 404 (an unknown model, or a base_url without the
// API's path) and any other 4xx INVALID_REQUEST: the target refuses the request itself, so
// sending it to that target again cannot help; so is a redirect (3xx), which is not followed
// (refuseRedirect) and is the answer to every request sent to that base_url. Anything else is
// a non-classified generation failure.
func classify(status int, pm providerMessage) (typev1.ErrorClass, string) {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return typev1.ErrorClass_ERROR_CLASS_AUTH, "authentication failed"
	case status == http.StatusPaymentRequired || pm.quota():
		return typev1.ErrorClass_ERROR_CLASS_QUOTA, "quota exceeded"
	case status == http.StatusTooManyRequests:
		return typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, "rate limited"
	case status == http.StatusRequestTimeout:
		return typev1.ErrorClass_ERROR_CLASS_TIMEOUT, "request timeout"
	case status == http.StatusConflict:
		return typev1.ErrorClass_ERROR_CLASS_SERVER, "conflict"
	case status >= 400 && status <= 499 && pm.contextOverflow():
		return typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW, "longer than the model's context window"
	case status == http.StatusNotFound:
		return typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, "not found"
	case status >= 400 && status <= 499:
		return typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, "request refused"
	case status == statusOverloaded:
		return typev1.ErrorClass_ERROR_CLASS_SERVER, "overloaded"
	case status >= 500:
		return typev1.ErrorClass_ERROR_CLASS_SERVER, "server error"
	case isRedirect(status):
		return typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, "redirected"
	}
	return typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED, "request rejected"
}

// statusOverloaded is Anthropic's "overloaded" status.
const statusOverloaded = 529

// statusText is the status's reason phrase, with Anthropic's 529.
func statusText(status int) string {
	if status == statusOverloaded {
		return "Overloaded"
	}
	return http.StatusText(status)
}

// answerError classifies an error a provider sends inside a 2xx answer, where says where ("in
// the stream", "in the answer"). A code that is an HTTP error status (OpenRouter's and vLLM's
// errors carry one) classifies it as that status would (classify); else its type or code
// does: quota QUOTA, rate limits RATE_LIMITED, authentication and permission errors AUTH, a
// refusal of a request longer than the model's context window (contextOverflow: OpenAI's
// context_length_exceeded) CONTEXT_OVERFLOW, another request the provider refuses
// (invalid_request_error, request_too_large) INVALID_REQUEST, anything else (server errors,
// overloaded) SERVER.
func (e *endpoint) answerError(where string, pm providerMessage, raw []byte) error {
	class := typev1.ErrorClass_ERROR_CLASS_SERVER
	switch status, err := strconv.Atoi(pm.code); {
	case err == nil && status >= 400 && status <= 599:
		class, _ = classify(status, pm)
	case pm.quota():
		class = typev1.ErrorClass_ERROR_CLASS_QUOTA
	case strings.Contains(pm.code, "rate_limit") || strings.Contains(pm.typ, "rate_limit"):
		class = typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED
	case pm.typ == "authentication_error" || pm.typ == "permission_error":
		class = typev1.ErrorClass_ERROR_CLASS_AUTH
	case pm.contextOverflow():
		class = typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW
	case pm.typ == "invalid_request_error" || pm.typ == "request_too_large":
		class = typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST
	}
	msg := cmp.Or(pm.message, string(raw))
	return stageerr.Generation(class, 0, "%s", e.redact(fmt.Sprintf("%s: error %s: %s", e.name, where, truncate(msg, 500))))
}

// parseErrorBody reads {"error": {"message", "type", "code", "details": {"error_code"}}}
// (OpenAI, and Anthropic under {"type": "error"}), {"error": "text"} or {"message": "text"}.
func parseErrorBody(body []byte) providerMessage {
	var envelope struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &envelope) != nil {
		return providerMessage{}
	}
	var detail struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
		Details struct {
			ErrorCode string `json:"error_code"`
		} `json:"details"`
	}
	if json.Unmarshal(envelope.Error, &detail) == nil && (detail.Message != "" || detail.Type != "") {
		code := detail.Details.ErrorCode
		if detail.Code != nil {
			code = fmt.Sprint(detail.Code)
		}
		return providerMessage{message: detail.Message, typ: detail.Type, code: code}
	}
	var text string
	if json.Unmarshal(envelope.Error, &text) == nil && text != "" {
		return providerMessage{message: text}
	}
	return providerMessage{message: envelope.Message}
}

// errProviderTimeout is the cause of the end of a call's context when the provider's timeout
// ended it (withTimeout), not the caller's deadline.
var errProviderTimeout = errors.New("provider timeout")

// withTimeout bounds a call's context by the provider's timeout, which, when it ends the
// call, is the context's cause (errProviderTimeout).
func (e *endpoint) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, e.timeout, errProviderTimeout)
}

// transportError classifies a failure to get an answer: a deadline is TIMEOUT, which says
// whose it was (the provider's timeout or the caller's deadline), anything else NETWORK;
// cancellation by the caller passes through unchanged.
func (e *endpoint) transportError(ctx context.Context, err error) error {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled) && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return err
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		(errors.As(err, &netErr) && netErr.Timeout()):
		whose := "the HTTP client's own timeout"
		switch {
		case errors.Is(context.Cause(ctx), errProviderTimeout):
			whose = fmt.Sprintf("provider timeout %s", e.timeout)
		case ctx.Err() != nil:
			whose = "the caller's deadline"
		}
		return stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_TIMEOUT, 0,
			"%s: no answer from %s in time (%s): %s", e.name, e.shownURL, whose, e.redact(err.Error()))
	}
	return stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_NETWORK, 0,
		"%s: cannot reach %s: %s", e.name, e.shownURL, e.redact(err.Error()))
}

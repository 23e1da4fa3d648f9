package generation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
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

// statusError classifies a non-2xx answer: 401/403 AUTH; 402 or an insufficient_quota body
// QUOTA; other 429 RATE_LIMITED with the advertised retry delay; 5xx SERVER; any other status
// a non-classified generation failure.
func (o *openAI) statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	pm := parseErrorBody(body)
	status := resp.StatusCode
	class, what := typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED, "request rejected"
	var wait time.Duration
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		class, what = typev1.ErrorClass_ERROR_CLASS_AUTH, "authentication failed"
	case status == http.StatusPaymentRequired || pm.code == "insufficient_quota" || pm.typ == "insufficient_quota":
		class, what = typev1.ErrorClass_ERROR_CLASS_QUOTA, "quota exceeded"
	case status == http.StatusTooManyRequests:
		class, what = typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, "rate limited"
		wait, _ = retryAfter(resp.Header, time.Now())
	case status >= 500:
		class, what = typev1.ErrorClass_ERROR_CLASS_SERVER, "server error"
		wait, _ = retryAfter(resp.Header, time.Now())
	}
	detail := pm.message
	if detail == "" {
		detail = snippet(body)
	}
	msg := fmt.Sprintf("%s: %s (HTTP %d %s): %s", o.name, what, status, http.StatusText(status), truncate(detail, 500))
	if wait > 0 {
		msg += fmt.Sprintf("; retry after %s", wait)
	}
	return stageerr.Generation(class, wait, "%s", o.redact(msg))
}

// parseErrorBody reads {"error": {"message", "type", "code"}}, {"error": "text"} or
// {"message": "text"}.
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
	}
	if json.Unmarshal(envelope.Error, &detail) == nil && (detail.Message != "" || detail.Type != "") {
		code := ""
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

// retryAfter reads the retry delay a response advertises: retry-after-ms (milliseconds),
// else Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && !math.IsInf(ms, 0) {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 && !math.IsInf(secs, 0) {
		return time.Duration(secs * float64(time.Second)), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// transportError classifies a failure to get an answer: a deadline is TIMEOUT, anything else
// NETWORK; cancellation by the caller passes through unchanged.
func (o *openAI) transportError(ctx context.Context, err error) error {
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled) && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return err
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) ||
		(errors.As(err, &netErr) && netErr.Timeout()):
		return stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_TIMEOUT, 0,
			"%s: no answer from %s in time (provider timeout %s): %s", o.name, o.baseURL, o.timeout, o.redact(err.Error()))
	}
	return stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_NETWORK, 0,
		"%s: cannot reach %s: %s", o.name, o.baseURL, o.redact(err.Error()))
}

package mcp

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentmesh/agentmesh/pkg/retryafter"
)

// busyTransport turns a remote server's answer to a call that says the server did not take
// it, 429 Too Many Requests or 503 Service Unavailable (what a gateway answers while the server
// is overloaded or redeployed), into a *busyError, which the call's failure wraps (notSent):
// the SDK made it a failure like the tool's own, which the action stage never tried again.
// Other answers, and those to what is no call, pass as they are.
type busyTransport struct {
	base http.RoundTripper
}

// RoundTrip sends req and returns its response, or a *busyError for a call the server did not
// take.
func (t *busyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || !busyStatus(resp.StatusCode) || req.Method != http.MethodPost ||
		callID(req) == nil {
		return resp, err
	}
	_ = resp.Body.Close()
	after, _ := retryafter.Parse(resp.Header, time.Now())
	return nil, &busyError{status: resp.Status, after: after}
}

// busyStatus reports whether an HTTP status says the server did not take the request and may
// later.
func busyStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
}

// busyError is the failure of a call a remote server did not take (busyTransport).
type busyError struct {
	status string        // e.g. "503 Service Unavailable"
	after  time.Duration // its Retry-After, 0 when it sent none
}

// Error says the status and that the server did not take the call.
func (e *busyError) Error() string {
	return fmt.Sprintf("the server answered %s: it did not take the call", e.status)
}

// RetryAfter is how long the server that did not take a call (it answered 429 or 503) asked
// to be left before the call is tried again, its Retry-After; 0 when err is no such failure or
// the server did not say.
func RetryAfter(err error) time.Duration {
	var busy *busyError
	if errors.As(err, &busy) {
		return busy.after
	}
	return 0
}

package llmtest

import (
	"io"
	"net/http"
	"strconv"
)

// knownFailures are the failure kinds a Turn may inject.
var knownFailures = map[string]bool{
	FailModelError:      true,
	FailNetworkError:    true,
	FailTimeout:         true,
	FailInvalidResponse: true,
	FailRateLimit:       true,
	FailAuthError:       true,
	FailQuotaExceeded:   true,
}

// fail answers the request with the turn's injected failure.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, req Request, t Turn) {
	switch t.Failure {
	case FailModelError:
		writeJSON(w, http.StatusInternalServerError,
			newErrorBody("server_error", "", "The server had an error while processing your request."))
	case FailNetworkError:
		s.dropConnection(w)
	case FailTimeout:
		select {
		case <-r.Context().Done():
		case <-s.closing:
			s.dropConnection(w)
		}
	case FailInvalidResponse:
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: {\"id\": \"chatcmpl-broken\", \"choices\": [\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "chatcmpl-broken", "choices": [{"index": 0, "message": `)
	case FailRateLimit:
		if t.RetryAfterMS > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ceilDiv(t.RetryAfterMS, 1000)))
			w.Header().Set("retry-after-ms", strconv.Itoa(t.RetryAfterMS))
		}
		writeJSON(w, http.StatusTooManyRequests, newErrorBody("requests", "rate_limit_exceeded",
			"Rate limit reached for %s: please try again later.", req.Model))
	case FailAuthError:
		writeJSON(w, http.StatusUnauthorized, newErrorBody("invalid_request_error", "invalid_api_key",
			"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."))
	case FailQuotaExceeded:
		writeJSON(w, http.StatusTooManyRequests, newErrorBody("insufficient_quota", "insufficient_quota",
			"You exceeded your current quota, please check your plan and billing details."))
	}
}

// dropConnection closes the request's connection without writing a response.
func (s *Server) dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.recordf("cannot hijack the connection: %v", err)
		return
	}
	_ = conn.Close()
}

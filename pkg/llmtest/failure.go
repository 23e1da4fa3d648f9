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
	FailOverloaded:      true,
	FailBadRequest:      true,
	FailContextLength:   true,
}

// statusOverloaded is Anthropic's "overloaded" status.
const statusOverloaded = 529

// fail answers the request with the turn's injected failure, as the API of the request
// would.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, req Request, t Turn, api dialect) {
	switch t.Failure {
	case FailNetworkError:
		s.dropConnection(w)
	case FailTimeout:
		await[struct{}](s, w, r, nil)
	case FailInvalidResponse:
		writeInvalid(w, req, api)
	case FailRateLimit:
		if t.RetryAfterMS > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ceilDiv(t.RetryAfterMS, 1000)))
			if api == openAIAPI {
				w.Header().Set("retry-after-ms", strconv.Itoa(t.RetryAfterMS))
			}
		}
		if api == anthropicAPI {
			writeError(w, api, http.StatusTooManyRequests, "rate_limit_error", "",
				"This request would exceed the rate limit for your organization of 50 requests per minute. Please try again later.")
			return
		}
		writeError(w, api, http.StatusTooManyRequests, "requests", "rate_limit_exceeded",
			"Rate limit reached for "+req.Model+": please try again later.")
	default:
		f := apiFailures[api][t.Failure]
		writeError(w, api, f.status, f.typ, f.code, f.message)
	}
}

// apiFailure is an error answer of one API.
type apiFailure struct {
	status             int
	typ, code, message string
}

// apiFailures are the plain error answers of each API, by failure kind.
var apiFailures = map[dialect]map[string]apiFailure{
	openAIAPI: {
		FailModelError: {http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request."},
		FailAuthError: {http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."},
		FailQuotaExceeded: {http.StatusTooManyRequests, "insufficient_quota", "insufficient_quota",
			"You exceeded your current quota, please check your plan and billing details."},
		FailOverloaded: {http.StatusServiceUnavailable, "server_error", "", "The engine is currently overloaded, please try again later."},
		FailBadRequest: {http.StatusBadRequest, "invalid_request_error", "unsupported_parameter",
			"Unsupported parameter: 'stop' is not supported with this model."},
		FailContextLength: {http.StatusBadRequest, "invalid_request_error", "context_length_exceeded",
			"This model's maximum context length is 128000 tokens. However, your messages resulted " +
				"in 131072 tokens. Please reduce the length of the messages."},
	},
	anthropicAPI: {
		FailModelError: {http.StatusInternalServerError, "api_error", "", "Internal server error"},
		FailAuthError:  {http.StatusUnauthorized, "authentication_error", "", "invalid x-api-key"},
		FailQuotaExceeded: {http.StatusBadRequest, "invalid_request_error", "",
			"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."},
		FailOverloaded: {statusOverloaded, "overloaded_error", "", "Overloaded"},
		FailBadRequest: {http.StatusBadRequest, "invalid_request_error", "", "tools.0.custom.input_schema: JSON schema is invalid"},
		FailContextLength: {http.StatusBadRequest, "invalid_request_error", "",
			"prompt is too long: 208917 tokens > 200000 maximum"},
	},
}

// writeInvalid answers HTTP 200 with a body that breaks off mid-JSON: a completion or
// message body, or a stream whose first event is cut.
func writeInvalid(w http.ResponseWriter, req Request, api dialect) {
	switch {
	case req.Stream && api == anthropicAPI:
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\": \"message_start\", \"message\": {\n\n")
	case req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\": \"chatcmpl-broken\", \"choices\": [\n\ndata: [DONE]\n\n")
	case api == anthropicAPI:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "msg_broken", "type": "message", "content": [`)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "chatcmpl-broken", "choices": [{"index": 0, "message": `)
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

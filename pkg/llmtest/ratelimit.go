package llmtest

import (
	"net/http"
	"strconv"
)

// RateLimit is the rate-limit headroom a turn's responses announce in their headers, as
// providers do: x-ratelimit-remaining-requests and x-ratelimit-remaining-tokens (OpenAI), or
// anthropic-ratelimit-requests-remaining and anthropic-ratelimit-tokens-remaining (Anthropic).
type RateLimit struct {
	// RemainingRequests is the number of requests left in the current window.
	RemainingRequests int `yaml:"remaining_requests" json:"remaining_requests"`
	// RemainingTokens is the number of tokens left in the current window.
	RemainingTokens int `yaml:"remaining_tokens" json:"remaining_tokens"`
}

// setHeaders sets the headers of the headroom in h, in the API's names; a nil RateLimit sets
// none.
func (l *RateLimit) setHeaders(h http.Header, api dialect) {
	if l == nil {
		return
	}
	requests, tokens := "x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens"
	if api == anthropicAPI {
		requests, tokens = "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-tokens-remaining"
	}
	h.Set(requests, strconv.Itoa(l.RemainingRequests))
	h.Set(tokens, strconv.Itoa(l.RemainingTokens))
}

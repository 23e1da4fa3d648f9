package generation

import (
	"context"
	"net/http"
	"strconv"
	"strings"
)

// The headers in which providers announce the headroom left in their rate-limit windows:
// OpenAI's (and most OpenAI-compatible servers') and Anthropic's.
var (
	remainingRequestsHeaders = []string{"x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining"}
	remainingTokensHeaders   = []string{"x-ratelimit-remaining-tokens", "anthropic-ratelimit-tokens-remaining"}
)

// rateLimit is the headroom one provider response announced; nil for what it did not say.
type rateLimit struct {
	requests, tokens *int64
}

// rateLimitsKey is the context key of the observer of rate-limit headers.
type rateLimitsKey struct{}

// withRateLimits returns ctx with observe as the observer of the rate-limit headroom that
// provider responses to requests made with it announce.
func withRateLimits(ctx context.Context, observe func(rateLimit)) context.Context {
	return context.WithValue(ctx, rateLimitsKey{}, observe)
}

// observeRateLimits passes the headroom announced in a provider response's header, if any, to
// the observer of ctx, if any.
func observeRateLimits(ctx context.Context, h http.Header) {
	observe, ok := ctx.Value(rateLimitsKey{}).(func(rateLimit))
	if !ok {
		return
	}
	l := rateLimit{requests: headerCount(h, remainingRequestsHeaders), tokens: headerCount(h, remainingTokensHeaders)}
	if l.requests != nil || l.tokens != nil {
		observe(l)
	}
}

// headerCount is the first of the named headers that holds a count, or nil.
func headerCount(h http.Header, names []string) *int64 {
	for _, name := range names {
		if n, err := strconv.ParseInt(strings.TrimSpace(h.Get(name)), 10, 64); err == nil && n >= 0 {
			return &n
		}
	}
	return nil
}

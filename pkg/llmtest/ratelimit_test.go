package llmtest_test

import (
	"net/http"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestRateLimitHeaders: a turn's RateLimit is announced in the rate-limit headers of its API,
// on an injected failure as on the answer.
func TestRateLimitHeaders(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Name: "limits", Match: "*", Turns: []llmtest.Turn{{
		Content: "hi", Failure: llmtest.FailRateLimit, FailuresBeforeSuccess: 1,
		RateLimit: &llmtest.RateLimit{RemainingRequests: 7, RemainingTokens: 900},
	}}})
	c := newClient(t)
	want := func(resp *http.Response, status int, requests, tokens string) {
		t.Helper()
		wantStatus(t, resp, status)
		if got := resp.Header.Get(requests); got != "7" {
			t.Errorf("%s: %q, want 7", requests, got)
		}
		if got := resp.Header.Get(tokens); got != "900" {
			t.Errorf("%s: %q, want 900", tokens, got)
		}
	}
	resp, _ := post(t, c, srv.URL()+"/chat/completions", chatBody("user", "x"))
	want(resp, http.StatusTooManyRequests, "x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens")
	resp, _ = post(t, c, srv.URL()+"/chat/completions", chatBody("user", "x"))
	want(resp, http.StatusOK, "x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens")
	resp, _ = postMessages(t, c, srv.URL(), messagesBody("user", "x"), nil)
	want(resp, http.StatusOK, "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-tokens-remaining")
}

package generation_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// TestRedirectsAreNotFollowed: a provider's answer that redirects elsewhere is a failure
// that names where it points, and nothing is sent there. Followed, a 301 or 302 turned the
// POST into a GET without its body and sent it to the other host with every header but
// Authorization: Anthropic's x-api-key and the configured headers went to whatever host the
// redirect named, and the caller saw that host's answer to a GET ("request rejected (HTTP
// 404)") instead of the redirect.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if r.Header.Get("X-Api-Key") != "" || r.Header.Get("X-Team") != "" {
			t.Errorf("the redirect's host got the request's credentials and headers: %v", r.Header)
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	// Another host name for the same server: net/http keeps only Authorization from it.
	target := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, http.StatusFound)
	})
	for name, p := range map[string]generation.Provider{
		"anthropic": anthropicAt(t, url, nil),
		"openai":    openAIAt(t, url, nil),
		"anthropic-default-client": generation.NewAnthropic(generation.AnthropicOptions{
			BaseURL: url, APIKey: testAPIKey, Headers: map[string]string{"X-Team": "agents"}}),
	} {
		t.Run(name, func(t *testing.T) {
			client := serveProviders(t, map[string]generation.Provider{"p": p})
			for _, stream := range []bool{false, true} {
				var err error
				if stream {
					_, _, err = streamAll(t, client, request("p", "m", user("hi")))
				} else {
					_, err = client.Generate(t.Context(), request("p", "m", user("hi")))
				}
				se := stageError(t, err, codes.InvalidArgument)
				for _, want := range []string{"HTTP 302 Found", "redirects to " + target + "/v1/",
					"not followed"} {
					if !strings.Contains(se.Msg, want) {
						t.Errorf("stream %v: message %q lacks %q", stream, se.Msg, want)
					}
				}
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("%d requests went to the redirect's host", n)
			}
		})
	}
}

// TestRedirectIsInvalidRequest: a redirect is the provider's answer to every request sent to
// that base_url, so retrying it (another attempt, a backoff) cannot help: it is
// INVALID_REQUEST, which no attempt retries, and its message names the status, where it
// points and the base_url to configure. It was a failure of no class (UNKNOWN), retried as a
// transient one.
func TestRedirectIsInvalidRequest(t *testing.T) {
	moved := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "moved here"}}})
	target := moved.URL() + "/chat/completions"
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
				Redirect: target, RedirectStatus: status,
			}}})
			client := openAIClient(t, srv, nil)
			for _, stream := range []bool{false, true} {
				var err error
				if stream {
					_, _, err = streamAll(t, client, request("openai", "m", user("hi")))
				} else {
					_, err = client.Generate(t.Context(), request("openai", "m", user("hi")))
				}
				se := stageError(t, err, codes.InvalidArgument)
				if se.Class != typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST || se.Retryable() {
					t.Errorf("stream %v: class %v (retryable %v), want INVALID_REQUEST, not retryable",
						stream, se.Class, se.Retryable())
				}
				for _, want := range []string{
					fmt.Sprintf("(HTTP %d %s)", status, http.StatusText(status)),
					"redirects to " + target,
					"set providers.openai.base_url to " + moved.URL(),
				} {
					if !strings.Contains(se.Msg, want) {
						t.Errorf("stream %v: message %q lacks %q", stream, se.Msg, want)
					}
				}
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("%d requests to the provider, want 2 (one per call, none retried)", n)
			}
		})
	}
	if n := len(moved.Requests()); n != 0 {
		t.Errorf("%d requests followed the redirect", n)
	}
}

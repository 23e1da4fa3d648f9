package generation_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

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
				se := stageError(t, err, codes.Unavailable)
				for _, want := range []string{"HTTP 302 Found", "redirected to " + target + "/v1/",
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

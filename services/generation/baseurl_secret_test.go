package generation_test

import (
	"cmp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// TestBaseURLPasswordNeverAppears: the password of a base_url that carries one (a proxy's
// basic authentication, https://user:password@host/v1) is not in any failure a caller sees:
// one that names the provider's address (cannot reach it, no answer in time, the connection
// lost while the answer streamed, a base URL that does not parse) names it with the password
// masked.
func TestBaseURLPasswordNeverAppears(t *testing.T) {
	const password = "hunter2-proxy-secret"
	withPassword := func(url string) string {
		return strings.Replace(url, "http://", "http://agent:"+password+"@", 1)
	}
	for _, tc := range []struct {
		name    string
		url     func(t *testing.T) (string, func() int)
		stream  bool
		timeout time.Duration
		code    codes.Code
		masked  string // how the message names the address; "" for agent:xxxxx@127.0.0.1:
	}{
		{name: "connection refused", url: closedPort, code: codes.Unavailable},
		{name: "no answer in time", url: scripted(llmtest.FailTimeout, 0),
			timeout: 100 * time.Millisecond, code: codes.DeadlineExceeded},
		{name: "connection lost while streaming", stream: true, code: codes.Unavailable,
			url: cutOff("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n")},
		{name: "a base URL that does not parse", code: codes.InvalidArgument,
			url: func(*testing.T) (string, func() int) {
				return "http://127.0.0.1:port/v1", func() int { return 0 }
			}, masked: "bad base URL http://***@127.0.0.1:port/v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := tc.url(t)
			p := openAIAt(t, withPassword(url), func(o *generation.OpenAIOptions) {
				o.Timeout = tc.timeout
			})
			client := serveProviders(t, map[string]generation.Provider{"openai": p})
			var err error
			if tc.stream {
				_, _, err = streamAll(t, client, request("openai", "m", user("hi")))
			} else {
				_, err = client.Generate(t.Context(), request("openai", "m", user("hi")))
			}
			se := stageError(t, err, tc.code)
			masked := cmp.Or(tc.masked, "agent:xxxxx@127.0.0.1:")
			if strings.Contains(se.Msg, password) || !strings.Contains(se.Msg, masked) {
				t.Errorf("message %q shows the base URL's password, or no masked address", se.Msg)
			}
		})
	}
}

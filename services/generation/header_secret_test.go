package generation_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// TestHeaderCredentialsNeverAppear: a credential configured as a header (a gateway's
// Authorization, Azure's api-key, Anthropic's x-api-key) instead of api_key is redacted from
// failures as the API key is, whole and as the token after its scheme; it was quoted when the
// provider echoed it. A header that is no credential is left as it is.
func TestHeaderCredentialsNeverAppear(t *testing.T) {
	const (
		bearer = "gw-SECRET-bearer-4242"
		azure  = "azure-SECRET-key-1717"
		xKey   = "anthropic-SECRET-key-99"
	)
	headers := map[string]string{
		"Authorization": "Bearer " + bearer,
		"api-key":       azure,
		"x-api-key":     xKey,
		"X-Title":       "my-agent-app",
	}
	// The server answers 401 quoting every header it got, and the bearer token alone.
	url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		var quoted []string
		for k := range headers {
			quoted = append(quoted, k+"="+r.Header.Get(k))
		}
		token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, fmt.Sprintf(`{"error":{"message":"bad credentials %s (token %s)","type":"auth"}}`,
			strings.Join(quoted, " "), token))
	})
	for name, p := range map[string]generation.Provider{
		"openai": openAIAt(t, url, func(o *generation.OpenAIOptions) { o.APIKey, o.Headers = "", headers }),
		"anthropic": anthropicAt(t, url, func(o *generation.AnthropicOptions) {
			o.APIKey, o.Headers = "", headers
		}),
	} {
		t.Run(name, func(t *testing.T) {
			client := serveProviders(t, map[string]generation.Provider{name: p})
			_, err := client.Generate(t.Context(), request(name, "m", user("hi")))
			se := stageError(t, err, codes.PermissionDenied)
			for _, secret := range []string{bearer, azure, xKey} {
				if strings.Contains(se.Msg, secret) {
					t.Errorf("message leaks %q: %q", secret, se.Msg)
				}
			}
			if !strings.Contains(se.Msg, "X-Title=my-agent-app") || !strings.Contains(se.Msg, "[redacted]") {
				t.Errorf("message %q, want the credentials [redacted] and X-Title as it is", se.Msg)
			}
		})
	}
}

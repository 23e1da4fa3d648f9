package generation_test

import (
	"context"
	"strings"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/generation"
)

// TestTimeoutSaysWhoseDeadline: a call that runs out of time says whose limit ended it: the
// provider's timeout, or the caller's deadline, which it named as the provider's timeout (an
// hour here) although that was far off.
func TestTimeoutSaysWhoseDeadline(t *testing.T) {
	for _, tc := range []struct {
		name            string
		providerTimeout time.Duration
		callerDeadline  time.Duration
		want, not       string
	}{
		{"the provider's timeout", 100 * time.Millisecond, time.Hour, "provider timeout 100ms", "caller's deadline"},
		{"the caller's deadline", time.Hour, 100 * time.Millisecond, "the caller's deadline", "provider timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := scripted(llmtest.FailTimeout, 0)(t)
			for name, p := range map[string]generation.Provider{
				"openai":    openAIAt(t, url, func(o *generation.OpenAIOptions) { o.Timeout = tc.providerTimeout }),
				"anthropic": anthropicAt(t, url, func(o *generation.AnthropicOptions) { o.Timeout = tc.providerTimeout }),
			} {
				for _, stream := range []bool{false, true} {
					ctx, cancel := context.WithTimeout(t.Context(), tc.callerDeadline)
					req := &generation.Request{Model: "m", Messages: []*typev1.Message{user("hi")}}
					var err error
					if stream {
						_, err = p.Stream(ctx, req, func(*generationv1.Delta) error { return nil })
					} else {
						_, err = p.Complete(ctx, req)
					}
					cancel()
					se := stageerr.As(err)
					if se == nil || se.Class != typev1.ErrorClass_ERROR_CLASS_TIMEOUT ||
						!strings.Contains(se.Msg, tc.want) || strings.Contains(se.Msg, tc.not) {
						t.Errorf("%s (stream %v): %v, want TIMEOUT saying %q, not %q", name, stream, err, tc.want, tc.not)
					}
				}
			}
		})
	}
}

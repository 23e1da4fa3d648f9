package generation_test

import (
	"net/http"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// TestGzipAnswersAreDecoded: a provider that compresses its answers with gzip (as one behind a
// compressing proxy does) is understood by both adapters, streamed or not, and so is the body
// of its error, also when the configured headers ask for gzip themselves (net/http then leaves
// the answer compressed).
func TestGzipAnswersAreDecoded(t *testing.T) {
	const answer = "compressed words arrive whole"
	adapters := map[string]struct {
		client func(*testing.T, *llmtest.Server, map[string]string) generationv1.GenerationServiceClient
		denied string // the provider's message for a bad key
	}{
		"openai": {func(t *testing.T, srv *llmtest.Server, h map[string]string) generationv1.GenerationServiceClient {
			return openAIClient(t, srv, func(o *generation.OpenAIOptions) { o.Headers = h })
		}, "Incorrect API key provided"},
		"anthropic": {func(t *testing.T, srv *llmtest.Server, h map[string]string) generationv1.GenerationServiceClient {
			return anthropicClient(t, srv, func(o *generation.AnthropicOptions) { o.Headers = h })
		}, "invalid x-api-key"},
	}
	for provider, adapter := range adapters {
		for _, headers := range []map[string]string{nil, {"Accept-Encoding": "gzip"}} {
			name := provider
			if headers != nil {
				name += "/configured"
			}
			t.Run(name, func(t *testing.T) {
				srv := llmtest.New(t,
					llmtest.Scenario{Match: "say it", Turns: []llmtest.Turn{{Content: answer, Gzip: true}}},
					llmtest.Scenario{Match: "fail", Turns: []llmtest.Turn{{Failure: llmtest.FailAuthError, Gzip: true}}},
				)
				c := adapter.client(t, srv, headers)
				resp, err := c.Generate(t.Context(), request(provider, "m", user("say it")))
				if err != nil {
					t.Fatal(err)
				}
				if resp.GetContent() != answer {
					t.Errorf("answer = %q, want %q", resp.GetContent(), answer)
				}
				_, final, err := streamAll(t, c, request(provider, "m", user("say it")))
				if err != nil {
					t.Fatal(err)
				}
				if final.GetContent() != answer {
					t.Errorf("streamed answer = %q, want %q", final.GetContent(), answer)
				}
				_, err = c.Generate(t.Context(), request(provider, "m", user("fail")))
				if se := stageError(t, err, codes.PermissionDenied); !strings.Contains(se.Error(), "authentication failed (HTTP 401") || !strings.Contains(se.Error(), adapter.denied) {
					t.Errorf("error = %v, want the provider's message", se)
				}
				for _, r := range srv.Requests() {
					if got := r.Header.Get("Accept-Encoding"); got != "gzip" {
						t.Errorf("Accept-Encoding = %q, want gzip", got)
					}
				}
			})
		}
	}
}

// TestAnAnswerCompressedOtherwiseIsABadResponse: an answer in an encoding the stage does not
// decode (the configured headers asked for it) is a BAD_RESPONSE that names the encoding, not
// a JSON error over its bytes.
func TestAnAnswerCompressedOtherwiseIsABadResponse(t *testing.T) {
	url := httpServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Encoding", "br")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte{0x1b, 0x2f, 0x00, 0xf8, 0x8d, 0x94})
	})
	c := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, func(o *generation.OpenAIOptions) {
		o.Headers = map[string]string{"Accept-Encoding": "br"}
	})})
	_, err := c.Generate(t.Context(), request("openai", "m", user("hi")))
	se := stageError(t, err, codes.Unavailable)
	if se.Class != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE || !strings.Contains(se.Error(), `compressed with "br"`) {
		t.Errorf("error %v of class %s, want a BAD_RESPONSE naming br", se, se.Class)
	}
}

// TestAnAnswerThatIsNotTheGzipItSaysIsABadResponse: an answer whose Content-Encoding says gzip
// but whose body is not gzip (a proxy that labels what it passes on wrongly) is a BAD_RESPONSE
// that says so, streamed or not. It was a NETWORK failure that said the provider could not be
// reached ("cannot reach …: gzip: invalid header"), or that the connection was lost while
// the answer streamed, though the provider had answered.
func TestAnAnswerThatIsNotTheGzipItSaysIsABadResponse(t *testing.T) {
	url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		if strings.Contains(r.Header.Get("Accept"), "event-stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(`data: {"choices":[{"delta":{"content":"Hi"}}]}` + "\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"Hi"},"finish_reason":"stop"}]}`))
	})
	c := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
	for _, stream := range []bool{false, true} {
		var err error
		if stream {
			_, _, err = streamAll(t, c, request("openai", "m", user("hi")))
		} else {
			_, err = c.Generate(t.Context(), request("openai", "m", user("hi")))
		}
		se := stageError(t, err, codes.Unavailable)
		if se.Class != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE ||
			!strings.Contains(se.Msg, "openai: the answer is not the gzip its Content-Encoding says") {
			t.Errorf("stream %v: failure %s %q, want a BAD_RESPONSE that says the encoding is wrong",
				stream, se.Class, se.Msg)
		}
	}
}

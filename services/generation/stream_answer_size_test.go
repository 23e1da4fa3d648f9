package generation_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// TestEndlessStreamIsBounded: a server that streams an answer without end (a runaway model,
// a broken proxy) is cut off once the answer outgrows what a non-streamed answer may be
// (32 MiB), BAD_RESPONSE; the answer grew in memory until the provider timeout ended it.
func TestEndlessStreamIsBounded(t *testing.T) {
	chunk := strings.Repeat("x", 1<<20)
	for name, event := range map[string]string{
		"openai": fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":%q}}]}\n\n", chunk),
		"anthropic": fmt.Sprintf("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"+
			"\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", chunk),
	} {
		t.Run(name, func(t *testing.T) {
			url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				if name == "anthropic" {
					_, _ = fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[]}}\n\n"+
						"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
				}
				for r.Context().Err() == nil {
					if _, err := fmt.Fprint(w, event); err != nil {
						return
					}
				}
			})
			var p generation.Provider
			if name == "openai" {
				p = openAIAt(t, url, func(o *generation.OpenAIOptions) { o.Timeout = time.Hour })
			} else {
				p = anthropicAt(t, url, func(o *generation.AnthropicOptions) { o.Timeout = time.Hour })
			}
			client := serveProviders(t, map[string]generation.Provider{name: p})
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // fails the test when unbounded
			defer cancel()
			_, _, err := streamWith(t, ctx, client, &generationv1.GenerateStreamRequest{Request: request(name, "m", user("hi"))})
			se := stageError(t, err, codes.Unavailable)
			if se.Class != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE || !strings.Contains(se.Msg, "the streamed answer is larger than 33554432 bytes") {
				t.Errorf("error %v %q, want BAD_RESPONSE: the streamed answer is larger than 33554432 bytes", se.Class, se.Msg)
			}
		})
	}
}

// TestOversizedAnswerSaysSo: a non-streamed answer over 32 MiB is BAD_RESPONSE saying it is
// too large; it was cut at the limit and refused as JSON that breaks off, a message that sent
// its reader looking for a broken server.
func TestOversizedAnswerSaysSo(t *testing.T) {
	body := `{"model":"m","choices":[{"message":{"content":"` + strings.Repeat("x", 33<<20) +
		`"},"finish_reason":"stop"}]}`
	url, _ := replying(http.StatusOK, nil, body)(t)
	client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
	_, err := client.Generate(t.Context(), request("openai", "m", user("hi")))
	se := stageError(t, err, codes.Unavailable)
	if se.Class != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE || !strings.Contains(se.Msg, "the answer is larger than 33554432 bytes") {
		t.Errorf("error %v %q, want BAD_RESPONSE: the answer is larger than 33554432 bytes", se.Class, se.Msg)
	}
}

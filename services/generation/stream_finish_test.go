package generation_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/services/generation"
)

// holdingOpen streams events, then holds the response open without ending it until the
// client goes away or the test ends: a server that never sends [DONE] or message_stop.
func holdingOpen(t *testing.T, events string) string {
	t.Helper()
	url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, events)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	return url
}

// TestStreamHeldOpenAfterItsFinish: a stream that brought its finish (and the usage that
// follows it) and then holds the connection open without its end marker is the answer at
// once, with that usage; it waited out the whole provider timeout. Without a usage chunk
// after the finish, the answer comes after a short grace. The call's deadline, far shorter
// than the provider's timeout, is what fails the test when the answer waits.
func TestStreamHeldOpenAfterItsFinish(t *testing.T) {
	const (
		openAIText   = "data: {\"model\":\"gpt-test\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"
		openAIFinish = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
		openAIUsage  = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\n"
		anthropicAll = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":7}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n"
	)
	for _, tc := range []struct {
		name, provider, events string
		total                  int64 // the usage the provider reported; 0: none, so estimated
	}{
		{"openai, usage after the finish", "openai", openAIText + openAIFinish + openAIUsage, 9},
		{"openai, usage with the finish", "openai",
			openAIText + "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2}}\n\n", 9},
		{"openai, no usage", "openai", openAIText + openAIFinish, 0},
		{"anthropic", "anthropic", anthropicAll, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := holdingOpen(t, tc.events)
			var p generation.Provider
			if tc.provider == "openai" {
				p = openAIAt(t, url, func(o *generation.OpenAIOptions) { o.Timeout = time.Hour })
			} else {
				p = anthropicAt(t, url, func(o *generation.AnthropicOptions) { o.Timeout = time.Hour })
			}
			client := serveProviders(t, map[string]generation.Provider{tc.provider: p})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			_, final, err := streamWith(t, ctx, client, &generationv1.GenerateStreamRequest{Request: request(tc.provider, "m", user("hi"))})
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			u := final.GetUsage()
			if final.GetContent() != "Hi" || tc.total > 0 && (u.GetTotal() != tc.total || u.GetEstimated()) ||
				tc.total == 0 && !u.GetEstimated() {
				t.Errorf("answer %q with usage %v, want Hi with %d tokens (0: estimated)", final.GetContent(), u, tc.total)
			}
		})
	}
}

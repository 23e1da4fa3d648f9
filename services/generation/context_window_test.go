package generation_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// TestAnswerStoppedAtTheContextWindowSaysSo: an answer Anthropic stopped because the model's
// context window filled up (stop_reason model_context_window_exceeded) before it had any
// content fails MAX_TOKENS_EXCEEDED, as one cut off at the output token limit does, but its
// message names the context window. It said "stopped at the output token limit
// (max_output_tokens 4096)", a limit the answer never reached, whose raising would not help.
func TestAnswerStoppedAtTheContextWindowSaysSo(t *testing.T) {
	message := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],` +
		`"stop_reason":"model_context_window_exceeded","usage":{"input_tokens":199990,"output_tokens":10}}`
	url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), "event-stream") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, message)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":"+
			`{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],`+
			`"usage":{"input_tokens":199990,"output_tokens":1}}}`+"\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":"+
			`{"stop_reason":"model_context_window_exceeded"},"usage":{"output_tokens":10}}`+"\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	})
	client := serveProviders(t, map[string]generation.Provider{"anthropic": anthropicAt(t, url, nil)})
	req := request("anthropic", "claude-x", user("hi"))
	req.Sampling = &generationv1.Sampling{MaxOutputTokens: 4096}
	for _, stream := range []bool{false, true} {
		var err error
		if stream {
			_, _, err = streamAll(t, client, req)
		} else {
			_, err = client.Generate(t.Context(), req)
		}
		se := stageError(t, err, codes.ResourceExhausted)
		if se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED ||
			!strings.Contains(se.Msg, "anthropic/claude-x stopped at its context window") ||
			strings.Contains(se.Msg, "output token limit") {
			t.Errorf("stream %v: failure %v %q, want MAX_TOKENS_EXCEEDED naming the context window",
				stream, se.Code, se.Msg)
		}
	}
}

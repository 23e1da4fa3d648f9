package generation_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// TestStreamEventOfManyLinesIsBounded: one server-sent event is bounded (16 MiB) however its
// data is split into lines: an event of many short "data:" lines without the blank line that
// ends it is BAD_RESPONSE once it is over the bound, as one long line is. Only the length of a
// line was bounded: such an event (here some JSON spread over 17 MiB of whitespace lines,
// which still decodes) was held whole, however large, and answered, and a server that never
// ended its event grew the stage's memory until the provider's timeout.
func TestStreamEventOfManyLinesIsBounded(t *testing.T) {
	url := httpServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"delta":{"content":"Hi"},"finish_reason":"stop"}]`+"\n")
		line := "data:" + strings.Repeat(" ", 64<<10) + "\n"
		for range 17 << 4 { // 17 MiB
			if _, err := fmt.Fprint(w, line); err != nil {
				return // the client gave up on the event
			}
		}
		fmt.Fprint(w, "data: }\n\ndata: [DONE]\n\n")
	})
	client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
	_, final, err := streamAll(t, client, request("openai", "m", user("hi")))
	if final != nil {
		t.Fatalf("answered %q, want a failure", final.GetContent())
	}
	se := stageError(t, err, codes.Unavailable)
	if se.Class != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE ||
		!strings.Contains(se.Msg, "a stream event is larger than 16777216 bytes") {
		t.Errorf("failure %v %q, want BAD_RESPONSE for an event over the bound", se.Class, se.Msg)
	}
}

package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc/metadata"
)

// TestCallersBaggageIsNotPassedOn: a caller of the public API that sends W3C baggage (an
// instrumented client's session or user ids, up to 8 KiB) has its run's trace continued, but
// its baggage goes no further: no stage reads it, and it was copied into every call to the
// stages and stored in the headers of every one of the run's events in JetStream.
func TestCallersBaggageIsNotPassedOn(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "chat", Match: "Hello", Turns: []llmtest.Turn{{Content: "Hi."}}})
	ctx := metadata.AppendToOutgoingContext(t.Context(), "baggage", "session.id=s3cr3t-session")
	res, err := h.client.Run(ctx, &agentv1.RunRequest{Message: "Hello"})
	if err != nil {
		t.Fatal(err)
	}
	checkEvents(t, h, res)
	_, msgs := h.storedEvents(t, res.GetRunId())
	for i, msg := range msgs {
		for k, v := range msg.Headers() {
			if strings.EqualFold(k, "baggage") || strings.Contains(strings.Join(v, ","), "s3cr3t-session") {
				t.Errorf("event %d carries the caller's baggage: %s: %q", i+1, k, v)
			}
		}
	}
}

package mesh_test

import (
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestServicesWithoutExporterPassTheTraceOn runs a mesh where only the generation stage
// exports its spans, as when an operator configures an exporter for one service: the others
// have telemetry.NewForwarder's provider, which records nothing. The run still has a trace id,
// its events carry it, and the generation stage's spans, the only ones recorded, are in it and
// sampled: the orchestrator passed the trace on.
func TestServicesWithoutExporterPassTheTraceOn(t *testing.T) {
	forwarder, recorder := telemetry.NewForwarder(nil), telemetry.NewRecorder()
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.TracerProvider = func(service string) trace.TracerProvider {
			if service == mesh.Generation {
				return recorder.Provider("agentmesh-" + service)
			}
			return forwarder
		}
	}, llmtest.Scenario{Name: "tool", Match: "What is 6 times 7?", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "call_calc", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
		{Content: "6 times 7 is 42."},
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	traceID, err := trace.TraceIDFromHex(res.GetTraceId())
	if err != nil {
		t.Fatalf("trace id %q: %v", res.GetTraceId(), err)
	}
	checkEvents(t, h, res) // every event's traceparent carries the run's trace

	chats := func() int {
		return len(slices.DeleteFunc(recorder.Trace(traceID), func(s sdktrace.ReadOnlySpan) bool { return s.Name() != "chat gpt-test" }))
	}
	if !eventually(t, 10*time.Second, func() bool { return chats() == 2 }) {
		t.Fatalf("trace %s has %d chat spans, want the run's two model calls", traceID, chats())
	}
	if got := recorder.Services(traceID); !slices.Equal(got, []string{"agentmesh-generation"}) {
		t.Errorf("trace %s has spans of %v, want the generation stage's alone", traceID, got)
	}
	for _, s := range recorder.Spans() {
		if s.SpanContext().TraceID() != traceID || !s.SpanContext().IsSampled() {
			t.Errorf("span %q of trace %s (sampled %v): want every recorded span in the run's sampled trace %s",
				s.Name(), s.SpanContext().TraceID(), s.SpanContext().IsSampled(), traceID)
		}
	}
}

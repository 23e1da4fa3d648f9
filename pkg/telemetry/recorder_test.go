package telemetry_test

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
)

func TestRecorderTellsServicesApart(t *testing.T) {
	rec := telemetry.NewRecorder()
	front := rec.Provider("agentmesh-orchestrator")
	back := rec.Provider("agentmesh-intent")

	ctx, root := front.Tracer("test").Start(t.Context(), "agentmesh.run")
	_, child := back.Tracer("test").Start(ctx, "parse")
	child.End()
	root.End()
	_, other := back.Tracer("test").Start(t.Context(), "unrelated")
	other.End()

	traceID := root.SpanContext().TraceID()
	if !traceID.IsValid() {
		t.Fatal("root span has no trace id: the provider does not sample")
	}
	if got := len(rec.Spans()); got != 3 {
		t.Errorf("Spans() = %d spans, want 3", got)
	}
	spans := rec.Trace(traceID)
	if len(spans) != 2 || spans[0].Name() != "parse" || spans[1].Name() != "agentmesh.run" {
		t.Errorf("Trace() = %v, want [parse agentmesh.run]", names(spans))
	}
	if got, want := rec.Services(traceID), []string{"agentmesh-intent", "agentmesh-orchestrator"}; !slices.Equal(got, want) {
		t.Errorf("Services() = %v, want %v", got, want)
	}
	if got, want := rec.Services(other.SpanContext().TraceID()), []string{"agentmesh-intent"}; !slices.Equal(got, want) {
		t.Errorf("Services(other trace) = %v, want %v", got, want)
	}
}

package telemetry_test

import (
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

func TestSetupInstallsGlobals(t *testing.T) {
	setEnv(t, nil)
	tp, shutdown, err := telemetry.Setup(t.Context(), "agentmesh-intent")
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != tp {
		t.Error("Setup did not install its provider globally")
	}
	fields := otel.GetTextMapPropagator().Fields()
	for _, want := range []string{"traceparent", "tracestate", "baggage"} {
		if !slices.Contains(fields, want) {
			t.Errorf("global propagator fields %v lack %q", fields, want)
		}
	}

	_, span := otel.Tracer("test").Start(t.Context(), "work")
	span.End()
	if !span.SpanContext().TraceID().IsValid() || !span.SpanContext().IsSampled() {
		t.Errorf("span context %v: want a sampled span with a real trace id", span.SpanContext())
	}
	ro, ok := span.(sdktrace.ReadOnlySpan)
	if !ok {
		t.Fatalf("span %T is not an SDK span", span)
	}
	if v, _ := ro.Resource().Set().Value(semconv.ServiceNameKey); v.AsString() != "agentmesh-intent" {
		t.Errorf("service.name = %q, want agentmesh-intent", v.AsString())
	}

	if err := shutdown(t.Context()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if _, after := tp.Tracer("test").Start(t.Context(), "after shutdown"); after.IsRecording() {
		t.Error("a span started after shutdown still records")
	}
}

func TestSetupRejectsBadConfig(t *testing.T) {
	setEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "smoke-signals"})
	if _, _, err := telemetry.Setup(t.Context(), "agentmesh-intent"); err == nil {
		t.Fatal("Setup accepted an unknown OTLP protocol")
	}
}

package telemetry_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// collectorEnv is the environment that has Setup export over OTLP/HTTP to a collector that
// takes every export.
func collectorEnv(t *testing.T) map[string]string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
}

// TestSetupInstallsGlobals proves that Setup, with an exporter configured, installs an SDK
// provider whose spans name the service, and the mesh's propagators, globally.
func TestSetupInstallsGlobals(t *testing.T) {
	setEnv(t, collectorEnv(t))
	tp, shutdown, err := telemetry.Setup(t.Context(), "agentmesh-intent")
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != tp {
		t.Error("Setup did not install its provider globally")
	}
	fields := otel.GetTextMapPropagator().Fields()
	for _, want := range []string{"traceparent", "tracestate"} {
		if !slices.Contains(fields, want) {
			t.Errorf("global propagator fields %v lack %q", fields, want)
		}
	}
	if slices.Contains(fields, "baggage") {
		t.Errorf("global propagator fields %v: a caller's baggage would go to every hop", fields)
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

// TestSetupWithoutExporterRecordsNothing proves that a service whose environment configures no
// exporter records no spans, yet starts a trace for a call that brings none and passes the
// trace context of a call that does on to the services it calls, unchanged.
func TestSetupWithoutExporterRecordsNothing(t *testing.T) {
	setEnv(t, nil)
	tp, shutdown, err := telemetry.Setup(t.Context(), "agentmesh-intent")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(t.Context()) }()
	if otel.GetTracerProvider() != tp {
		t.Error("Setup did not install its provider globally")
	}

	ctx, root := otel.Tracer("test").Start(t.Context(), "run")
	if root.IsRecording() {
		t.Error("the root span records with no exporter to take it")
	}
	if sc := root.SpanContext(); !sc.TraceID().IsValid() || !sc.SpanID().IsValid() || !sc.IsSampled() {
		t.Errorf("root span context %v: want a sampled span with a real trace id", sc)
	}
	_, child := otel.Tracer("test").Start(ctx, "step", trace.WithAttributes(semconv.ServiceName("x")))
	if child.IsRecording() || !child.SpanContext().Equal(root.SpanContext()) {
		t.Errorf("child span context %v (recording %v): want its parent's %v, not recorded", child.SpanContext(), child.IsRecording(), root.SpanContext())
	}

	incoming := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0xaa, 1}, SpanID: trace.SpanID{0xbb, 2}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ctx, span := otel.Tracer("test").Start(trace.ContextWithRemoteSpanContext(t.Context(), incoming), "call")
	span.End()
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	if want := "00-aa010000000000000000000000000000-bb02000000000000-01"; carrier["traceparent"] != want {
		t.Errorf("traceparent passed on = %q, want the caller's %q", carrier["traceparent"], want)
	}
}

func TestSetupRejectsBadConfig(t *testing.T) {
	setEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "smoke-signals"})
	if _, _, err := telemetry.Setup(t.Context(), "agentmesh-intent"); err == nil {
		t.Fatal("Setup accepted an unknown OTLP protocol")
	}
}

package telemetry

import (
	"slices"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Recorder keeps the spans of any number of tracer providers in memory, for tests. It is safe
// for concurrent use.
type Recorder struct {
	spans *tracetest.SpanRecorder
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{spans: tracetest.NewSpanRecorder()}
}

// Provider returns a new tracer provider for service that records its spans into r. Each
// provider has its own service.name resource, so spans tell which service made them.
func (r *Recorder) Provider(service string) *sdktrace.TracerProvider {
	return NewTracerProvider(service, sdktrace.WithSpanProcessor(r.spans))
}

// Spans returns the spans that have ended, in the order they ended.
func (r *Recorder) Spans() []sdktrace.ReadOnlySpan {
	return r.spans.Ended()
}

// Trace returns the ended spans of one trace, in the order they ended.
func (r *Recorder) Trace(traceID trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.SpanContext().TraceID() == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Services returns the distinct service.name values of the ended spans of one trace, sorted.
func (r *Recorder) Services(traceID trace.TraceID) []string {
	var names []string
	for _, s := range r.Trace(traceID) {
		if v, ok := s.Resource().Set().Value(semconv.ServiceNameKey); ok {
			names = append(names, v.AsString())
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

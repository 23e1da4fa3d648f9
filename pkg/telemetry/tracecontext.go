package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// TraceContextOf returns the W3C trace context (traceparent and tracestate) of the span in
// ctx, both empty when it has none: what a record that outlives its request (a run's
// checkpoint, a run queued for learning) keeps, so that later work joins the same trace.
func TraceContextOf(ctx context.Context) (traceparent, tracestate string) {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent"), carrier.Get("tracestate")
}

// WithTraceContext returns ctx with the remote span context that traceparent and tracestate
// (as TraceContextOf returned them) name as its parent; ctx as it is when they name none.
func WithTraceContext(ctx context.Context, traceparent, tracestate string) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent, "tracestate": tracestate})
}

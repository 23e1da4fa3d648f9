package telemetry

import (
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// NewTracerProvider returns a tracer provider whose resource names the service (service.name)
// on top of the SDK's default resource. Every root span is sampled, so every run has a real
// trace id even when nothing exports the spans; a child span follows its parent's decision.
// opts are applied last and may override these defaults (e.g. add a span processor).
func NewTracerProvider(service string, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	// Merging a schemaless resource cannot conflict, so Merge never fails here.
	res, _ := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	base := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
	}
	return sdktrace.NewTracerProvider(append(base, opts...)...)
}

// Propagator returns the propagator every hop of the mesh uses: W3C Trace Context and Baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

package telemetry

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// NewTracerProvider returns a tracer provider whose resource names the service (service.name)
// and this process (service.instance.id, see InstanceID) on top of the SDK's default resource.
// The sampler is the one OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG name (SamplerFromEnv;
// a bad value is reported to the OpenTelemetry error handler, as the SDK does), by default
// parentbased_always_on: every root span is sampled and a child span follows its parent's
// decision. Either way the spans of gRPC health checks are never sampled (see
// withoutHealthChecks). A span that is not sampled still has a real trace id, so every run
// has one even when nothing exports its spans. opts are applied last and may override these
// defaults (e.g. add a span processor).
func NewTracerProvider(service string, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	sampler, err := SamplerFromEnv()
	if err != nil {
		otel.Handle(err)
	}
	if sampler == nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithResource(newResource(service)), sdktrace.WithSampler(withoutHealthChecks(sampler)),
	}, opts...)...)
}

// NewExportingProvider returns NewTracerProvider(service) exporting its spans through exp in
// batches, and sampling as sampler says (nil: NewTracerProvider's default) but for the spans of
// gRPC health checks, which are never sampled, as SamplerFromEnv and ExporterFromEnv give them.
func NewExportingProvider(service string, exp sdktrace.SpanExporter, sampler sdktrace.Sampler) *sdktrace.TracerProvider {
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp)}
	if sampler != nil {
		opts = append(opts, sdktrace.WithSampler(withoutHealthChecks(sampler)))
	}
	return NewTracerProvider(service, opts...)
}

// Propagator returns the propagator every hop of the mesh uses: W3C Trace Context alone. No
// service reads baggage, and a caller's (an instrumented client's session or user ids, up to
// 8 KiB) was copied into every call to the stages and stored with every run event; a run's
// checkpoints keep the trace context alone too.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

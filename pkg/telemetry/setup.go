package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// Setup creates the service's tracer provider, sampling as SamplerFromEnv says and exporting
// in batches through ExporterFromEnv, and installs it and Propagator globally. When the
// environment configures no exporter, the provider is NewForwarder's: the service records no
// spans but passes trace context on and starts the traces of calls that bring none. shutdown
// flushes and stops the provider; call it before the process exits. A bad OTEL_* value is an
// error.
func Setup(ctx context.Context, service string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	sampler, err := SamplerFromEnv()
	if err != nil {
		return nil, nil, err
	}
	exp, err := ExporterFromEnv(ctx)
	if err != nil {
		return nil, nil, err
	}
	otel.SetTextMapPropagator(Propagator())
	if exp == nil {
		tp = NewForwarder(sampler)
		otel.SetTracerProvider(tp)
		return tp, func(context.Context) error { return nil }, nil
	}
	sdk := NewExportingProvider(service, exp, sampler)
	otel.SetTracerProvider(sdk)
	return sdk, sdk.Shutdown, nil
}

package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Setup creates the service's tracer provider, sampling as SamplerFromEnv says and exporting
// in batches through ExporterFromEnv when the environment configures an exporter, and installs
// it and Propagator globally. shutdown flushes and stops the provider; call it before the
// process exits. A bad OTEL_* value is an error.
func Setup(ctx context.Context, service string) (tp *sdktrace.TracerProvider, shutdown func(context.Context) error, err error) {
	sampler, err := SamplerFromEnv()
	if err != nil {
		return nil, nil, err
	}
	var opts []sdktrace.TracerProviderOption
	if sampler != nil {
		opts = append(opts, sdktrace.WithSampler(sampler))
	}
	exp, err := ExporterFromEnv(ctx)
	if err != nil {
		return nil, nil, err
	}
	if exp != nil {
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp = NewTracerProvider(service, opts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(Propagator())
	return tp, tp.Shutdown, nil
}

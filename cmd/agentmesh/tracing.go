package main

import (
	"context"
	"sync"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// devTracing gives each service of the in-process mesh its own tracer provider (so Jaeger
// shows agentmesh-intent, agentmesh-generation, ...), all sampling as OTEL_TRACES_SAMPLER says
// and exporting through the one exporter the standard OTEL_* variables configure. Without one,
// every service has the forwarder of telemetry.NewForwarder, which records no spans. shutdown
// flushes them, for as long as its context lets it, and stops the providers.
func devTracing(ctx context.Context) (providers func(service string) trace.TracerProvider, shutdown func(context.Context), err error) {
	sampler, err := telemetry.SamplerFromEnv()
	if err != nil {
		return nil, nil, err
	}
	exp, err := telemetry.ExporterFromEnv(ctx)
	if err != nil {
		return nil, nil, err
	}
	otel.SetTextMapPropagator(telemetry.Propagator())
	if exp == nil {
		forwarder := telemetry.NewForwarder(sampler)
		return func(string) trace.TracerProvider { return forwarder }, func(context.Context) {}, nil
	}
	var (
		mu     sync.Mutex
		byName = map[string]*sdktrace.TracerProvider{}
	)
	providers = func(service string) trace.TracerProvider {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := byName[service]; ok {
			return p
		}
		p := telemetry.NewExportingProvider("agentmesh-"+service, exp, sampler)
		byName[service] = p
		return p
	}
	shutdown = func(ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range byName {
			_ = p.ForceFlush(ctx)
		}
		_ = exp.Shutdown(ctx)
		// Each provider's own shutdown would shut the shared exporter down before the others
		// flushed; with it shut down, theirs only stops their batch processors, at once (and
		// must, even once ctx is done, or they would export on).
		for _, p := range byName {
			_ = p.Shutdown(context.WithoutCancel(ctx))
		}
	}
	return providers, shutdown, nil
}

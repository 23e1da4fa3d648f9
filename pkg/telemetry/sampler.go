package telemetry

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SamplerFromEnv returns the sampler the standard OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG variables ask for, or nil (and no error) when OTEL_TRACES_SAMPLER is
// unset, which leaves the default: parentbased_always_on. The samplers are always_on,
// always_off, traceidratio, parentbased_always_on, parentbased_always_off and
// parentbased_traceidratio; the ratio samplers take OTEL_TRACES_SAMPLER_ARG, a number from 0 to
// 1 (default 1). An unknown sampler or a bad ratio is an error naming the variable, where the
// SDK alone would log it and sample everything.
func SamplerFromEnv() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	switch name {
	case "":
		return nil, nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		ratio, err := samplerRatio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(ratio), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q is not supported: use always_on, always_off, traceidratio, "+
		"parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// samplerRatio returns the ratio of OTEL_TRACES_SAMPLER_ARG, 1 when it is unset.
func samplerRatio() (float64, error) {
	arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
	if arg == "" {
		return 1, nil
	}
	ratio, err := strconv.ParseFloat(arg, 64)
	if err != nil || !(ratio >= 0 && ratio <= 1) {
		return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q is not a sampling ratio: use a number from 0 to 1", arg)
	}
	return ratio, nil
}

// healthCheckSpans starts the names of the spans of the gRPC health service's calls (otelgrpc
// names a call's span by its method).
const healthCheckSpans = "grpc.health.v1.Health/"

// withoutHealthChecks returns a sampler that samples no span of a gRPC health service call
// and leaves every other span to s. A Kubernetes probe checks every replica every few
// seconds, and a client's health checking holds a Watch for as long as its connection lives:
// sampled, each was a trace of its own, whatever the runs' sampling (a stage's parent-based
// sampler samples every root), and a Watch span as long as the connection.
func withoutHealthChecks(s sdktrace.Sampler) sdktrace.Sampler { return healthChecksDropped{s} }

// healthChecksDropped is withoutHealthChecks's sampler.
type healthChecksDropped struct{ sdktrace.Sampler }

// ShouldSample drops a health check's span and asks the wrapped sampler about the others.
func (h healthChecksDropped) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if strings.HasPrefix(p.Name, healthCheckSpans) {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
	}
	return h.Sampler.ShouldSample(p)
}

// Description names the sampler and the one it wraps.
func (h healthChecksDropped) Description() string {
	return "WithoutHealthChecks{" + h.Sampler.Description() + "}"
}

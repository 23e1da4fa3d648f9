package telemetry

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// NewForwarder returns the tracer provider of a service that exports no spans: its spans
// record nothing, and each passes its parent's span context on, so that the trace context a
// call brings goes on to the services after it, which continue its trace if they export
// theirs. A root span (no parent, or trace.WithNewRoot) starts a trace: a new trace id and
// span id, so that a run still has a trace id (its result's trace_id, the traceparent its
// checkpoints keep). sampler decides, as in a provider that records, whether a span is
// sampled: the flag the services after it see. nil samples as parentbased_always_on does, a
// root always and a child as its parent.
//
// The SDK's provider records every sampled span, its attributes and events, whether or not a
// processor takes them (open-telemetry/opentelemetry-java#8740 and the collector's #15135 are
// the same waste): without an exporter, a run paid for all its spans and dropped them, and an
// idle run held some 5 KiB of them (issue 15). OpenTelemetry's noop provider forwards the
// same way but never starts a trace, which would leave a run without a trace id.
func NewForwarder(sampler sdktrace.Sampler) trace.TracerProvider {
	return forwarder{tracer: forwardingTracer{sampler: sampler}}
}

// forwarder is NewForwarder's provider: one tracer for every name.
type forwarder struct {
	embedded.TracerProvider
	tracer forwardingTracer
}

// Tracer returns the provider's tracer, whatever the name and options.
func (f forwarder) Tracer(string, ...trace.TracerOption) trace.Tracer { return f.tracer }

// forwardingTracer starts NewForwarder's spans.
type forwardingTracer struct {
	embedded.Tracer
	sampler sdktrace.Sampler
}

// Start returns ctx with a span that records nothing: the span of ctx's span context (with
// the sampled flag the sampler decides), or the root of a new trace when ctx has none or the
// options ask for a new root.
func (t forwardingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	parent := trace.SpanContextFromContext(ctx)
	cfg := trace.NewSpanStartConfig(opts...)
	root := !parent.IsValid() || cfg.NewRoot()
	if !root && t.sampler == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	sc := trace.SpanContextConfig{TraceID: parent.TraceID(), SpanID: parent.SpanID(), Remote: parent.IsRemote()}
	if root {
		binary.BigEndian.PutUint64(sc.TraceID[:8], rand.Uint64())
		binary.BigEndian.PutUint64(sc.TraceID[8:], rand.Uint64())
		binary.BigEndian.PutUint64(sc.SpanID[:], rand.Uint64()|1) // never the invalid all-zero id
		sc.Remote = false
	}
	sc.TraceFlags = trace.FlagsSampled
	if t.sampler != nil {
		sampling := ctx // the parent the sampler sees: none for a root
		if root {
			sampling = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
		}
		res := t.sampler.ShouldSample(sdktrace.SamplingParameters{
			ParentContext: sampling, TraceID: sc.TraceID, Name: name, Kind: cfg.SpanKind(),
			Attributes: cfg.Attributes(), Links: cfg.Links(),
		})
		if res.Decision != sdktrace.RecordAndSample {
			sc.TraceFlags = 0
		}
		sc.TraceState = res.Tracestate
	}
	ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(sc))
	return ctx, trace.SpanFromContext(ctx)
}

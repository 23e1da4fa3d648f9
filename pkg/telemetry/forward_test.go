package telemetry_test

import (
	"testing"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestForwarderStartsTraces proves that every root span of the forwarder starts a trace of its
// own, with ids no other root has, and that trace.WithNewRoot starts one under a parent too.
func TestForwarderStartsTraces(t *testing.T) {
	tracer := telemetry.NewForwarder(nil).Tracer("test")
	traces := map[trace.TraceID]bool{}
	spans := map[trace.SpanID]bool{}
	for range 1000 {
		_, root := tracer.Start(t.Context(), "run")
		sc := root.SpanContext()
		if !sc.IsValid() || !sc.IsSampled() || sc.IsRemote() || root.IsRecording() {
			t.Fatalf("root span context %v (recording %v): want a valid, sampled, local span that records nothing", sc, root.IsRecording())
		}
		if traces[sc.TraceID()] || spans[sc.SpanID()] {
			t.Fatalf("root %v repeats an id of an earlier root", sc)
		}
		traces[sc.TraceID()], spans[sc.SpanID()] = true, true
	}

	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(t.Context(), parent)
	_, fresh := tracer.Start(ctx, "public endpoint", trace.WithNewRoot())
	if sc := fresh.SpanContext(); !sc.IsValid() || sc.TraceID() == parent.TraceID() || sc.IsRemote() {
		t.Errorf("WithNewRoot under %v gave %v: want a trace of its own", parent, sc)
	}
}

// TestForwarderFlagsAsItsSamplerDecides proves that with a sampler the forwarder passes its
// parent's trace and span ids on with the sampled flag the sampler decides, as the services
// after it would see from a provider that records.
func TestForwarderFlagsAsItsSamplerDecides(t *testing.T) {
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, Remote: true})
	sampled := unsampled.WithTraceFlags(trace.FlagsSampled)
	table := []struct {
		name    string
		sampler sdktrace.Sampler
		parent  trace.SpanContext
		want    bool
	}{
		{"no sampler follows a sampled parent", nil, sampled, true},
		{"no sampler follows an unsampled parent", nil, unsampled, false},
		{"always_off under a sampled parent", sdktrace.NeverSample(), sampled, false},
		{"always_on under an unsampled parent", sdktrace.AlwaysSample(), unsampled, true},
		{"parentbased_always_off follows a sampled parent", sdktrace.ParentBased(sdktrace.NeverSample()), sampled, true},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			ctx := trace.ContextWithRemoteSpanContext(t.Context(), tc.parent)
			ctx, span := telemetry.NewForwarder(tc.sampler).Tracer("test").Start(ctx, "step")
			sc := span.SpanContext()
			if sc.TraceID() != tc.parent.TraceID() || sc.SpanID() != tc.parent.SpanID() || sc.IsSampled() != tc.want {
				t.Errorf("span context %v under %v: want the parent's ids, sampled %v", sc, tc.parent, tc.want)
			}
			if !trace.SpanContextFromContext(ctx).Equal(sc) {
				t.Error("the returned context does not carry the span")
			}
			if span.IsRecording() {
				t.Error("the span records")
			}
		})
	}
	_, root := telemetry.NewForwarder(sdktrace.NeverSample()).Tracer("test").Start(t.Context(), "run")
	if sc := root.SpanContext(); !sc.IsValid() || sc.IsSampled() {
		t.Errorf("always_off root %v: want a real trace id, not sampled", sc)
	}
}

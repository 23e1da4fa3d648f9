package telemetry_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// TestSetupHonoursSampler proves that Setup samples as OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG say, with an exporter (the SDK's provider) and without one (the
// forwarder, whose sampled flag is what the services after it see), but never the span of a
// gRPC health check it exports, and that a root span still gets a real trace id when it is
// not sampled.
func TestSetupHonoursSampler(t *testing.T) {
	sampledParent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	table := []struct {
		sampler, arg string
		// wantRoot and wantChild: whether a root span, and a child of a sampled remote parent,
		// are sampled.
		wantRoot, wantChild bool
	}{
		{sampler: "", wantRoot: true, wantChild: true},
		{sampler: "always_on", wantRoot: true, wantChild: true},
		{sampler: "always_off", wantRoot: false, wantChild: false},
		{sampler: "ALWAYS_OFF", wantRoot: false, wantChild: false},
		{sampler: "traceidratio", arg: "0", wantRoot: false, wantChild: false},
		{sampler: "traceidratio", arg: "1", wantRoot: true, wantChild: true},
		{sampler: "traceidratio", wantRoot: true, wantChild: true},
		{sampler: "parentbased_always_on", wantRoot: true, wantChild: true},
		{sampler: "parentbased_always_off", wantRoot: false, wantChild: true},
		{sampler: "parentbased_traceidratio", arg: "0", wantRoot: false, wantChild: true},
		{sampler: "parentbased_traceidratio", arg: " 1.0 ", wantRoot: true, wantChild: true},
	}
	for _, exporter := range []bool{true, false} {
		for _, tc := range table {
			t.Run(fmt.Sprintf("exporter=%v/%s=%s", exporter, tc.sampler, tc.arg), func(t *testing.T) {
				env := map[string]string{}
				if exporter {
					env = collectorEnv(t)
				}
				env["OTEL_TRACES_SAMPLER"], env["OTEL_TRACES_SAMPLER_ARG"] = tc.sampler, tc.arg
				setEnv(t, env)
				tp, shutdown, err := telemetry.Setup(t.Context(), "agentmesh-intent")
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = shutdown(t.Context()) }()
				tracer := tp.Tracer("test")

				_, root := tracer.Start(t.Context(), "root")
				root.End()
				if got := root.SpanContext().IsSampled(); got != tc.wantRoot {
					t.Errorf("root span sampled = %v, want %v", got, tc.wantRoot)
				}
				if !root.SpanContext().TraceID().IsValid() {
					t.Error("the root span has no trace id")
				}
				_, child := tracer.Start(trace.ContextWithRemoteSpanContext(t.Context(), sampledParent), "child")
				child.End()
				if got := child.SpanContext().IsSampled(); got != tc.wantChild {
					t.Errorf("child of a sampled parent sampled = %v, want %v", got, tc.wantChild)
				}
				// A health check is sampled by no sampler of a service that exports its spans.
				_, health := tracer.Start(t.Context(), "grpc.health.v1.Health/Check")
				health.End()
				if exporter && health.SpanContext().IsSampled() {
					t.Error("the span of a health check is sampled")
				}
				if recording := root.IsRecording() || child.IsRecording(); recording && !exporter {
					t.Error("a span records with no exporter to take it")
				}
			})
		}
	}
}

func TestSetupRejectsBadSampler(t *testing.T) {
	table := []struct {
		sampler, arg, wantErr string
	}{
		{"sometimes", "", `OTEL_TRACES_SAMPLER="sometimes" is not supported: use always_on, always_off, traceidratio`},
		{"traceidratio", "half", `OTEL_TRACES_SAMPLER_ARG="half" is not a sampling ratio: use a number from 0 to 1`},
		{"parentbased_traceidratio", "1.5", `OTEL_TRACES_SAMPLER_ARG="1.5" is not a sampling ratio`},
		{"traceidratio", "-0.1", `OTEL_TRACES_SAMPLER_ARG="-0.1" is not a sampling ratio`},
		{"traceidratio", "NaN", `OTEL_TRACES_SAMPLER_ARG="NaN" is not a sampling ratio`},
	}
	for _, tc := range table {
		t.Run(tc.sampler+"="+tc.arg, func(t *testing.T) {
			setEnv(t, map[string]string{"OTEL_TRACES_SAMPLER": tc.sampler, "OTEL_TRACES_SAMPLER_ARG": tc.arg})
			_, _, err := telemetry.Setup(t.Context(), "agentmesh-intent")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Setup: err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

package events

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
)

// TestPublishSpans proves that every publish of a run event is a producer span of the run's
// trace, with the OpenTelemetry messaging attributes, made by the publishing service's tracer
// provider, and that a subscriber's context (Watch) continues from that span.
func TestPublishSpans(t *testing.T) {
	env := newTestEnv(t)
	rec := telemetry.NewRecorder()
	ctx, run := rec.Provider("agentmesh-orchestrator").Tracer("test").Start(t.Context(), "agentmesh.run")
	rs := env.pub.Run("run-traced")
	for _, ev := range []*eventv1.RunEvent{runStarted("hello"), runFinished()} {
		if _, err := rs.Emit(ctx, ev); err != nil {
			t.Fatalf("Emit(%s): %v", Kind(ev), err)
		}
	}
	extra := toolFinished("search")
	extra.RunId, extra.Seq = "run-traced", 9
	if err := env.pub.Publish(ctx, extra); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	run.End()

	spans := rec.Trace(run.SpanContext().TraceID())
	publishes := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindProducer {
			publishes[s.Name()] = s
		}
	}
	want := []struct{ name, subject, id string }{
		{"publish agentmesh.run.{run_id}.run_started", "agentmesh.run.run-traced.run_started", "run-traced-1"},
		{"publish agentmesh.run.{run_id}.run_finished", "agentmesh.run.run-traced.run_finished", "run-traced-2"},
		{"publish agentmesh.run.{run_id}.tool_finished", "agentmesh.run.run-traced.tool_finished", "run-traced-9"},
	}
	if len(publishes) != len(want) {
		t.Fatalf("the run's trace holds producer spans %v, want %d publishes", names(spans), len(want))
	}
	for _, w := range want {
		s, ok := publishes[w.name]
		if !ok {
			t.Errorf("no span %q among %v", w.name, names(spans))
			continue
		}
		if s.Parent().SpanID() != run.SpanContext().SpanID() {
			t.Errorf("%s: parent %s, want the run's span %s", w.name, s.Parent().SpanID(), run.SpanContext().SpanID())
		}
		attrs := attribute.NewSet(s.Attributes()...)
		for key, value := range map[string]string{
			"messaging.system":               "nats",
			"messaging.operation.type":       "send",
			"messaging.operation.name":       "publish",
			"messaging.destination.name":     w.subject,
			"messaging.destination.template": "agentmesh.run.{run_id}." + w.name[len("publish agentmesh.run.{run_id}."):],
			"messaging.message.id":           w.id,
			"agentmesh.run.id":               "run-traced",
		} {
			if got, _ := attrs.Value(attribute.Key(key)); got.AsString() != value {
				t.Errorf("%s: %s = %q, want %q", w.name, key, got.AsString(), value)
			}
		}
		if got, _ := attrs.Value("messaging.message.body.size"); got.AsInt64() <= 0 {
			t.Errorf("%s: messaging.message.body.size = %v, want the payload's size", w.name, got)
		}
		if s.Status().Code == codes.Error {
			t.Errorf("%s: status %v", w.name, s.Status())
		}
	}

	// A subscriber continues from the publish span of each event.
	var parents []trace.SpanID
	err := Watch(t.Context(), env.js, "run-traced", 0, func(ctx context.Context, ev *eventv1.RunEvent) error {
		parents = append(parents, trace.SpanContextFromContext(ctx).SpanID())
		return nil
	})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if len(parents) != 2 {
		t.Fatalf("Watch delivered %d events before run_finished, want 2", len(parents))
	}
	for i, name := range []string{want[0].name, want[1].name} {
		if parents[i] != publishes[name].SpanContext().SpanID() {
			t.Errorf("event %d reaches the subscriber with span %s, want its publish span %s", i+1, parents[i], publishes[name].SpanContext().SpanID())
		}
	}
}

// TestPublishSpanRecordsFailure proves that a publish that fails ends its span with an error:
// status Error and error.type, the class of the failure, as the OpenTelemetry messaging
// conventions require of a failed operation (the span had the status alone).
func TestPublishSpanRecordsFailure(t *testing.T) {
	env := newTestEnv(t)
	rec := telemetry.NewRecorder()
	ctx, run := rec.Provider("agentmesh-orchestrator").Tracer("test").Start(t.Context(), "agentmesh.run")
	env.nc.Close()
	if _, err := env.pub.Run("run-closed").Emit(ctx, runStarted("hello")); err == nil {
		t.Fatal("Emit on a closed connection succeeded")
	}
	run.End()
	for _, s := range rec.Trace(run.SpanContext().TraceID()) {
		if s.SpanKind() == trace.SpanKindProducer {
			if s.Status().Code != codes.Error {
				t.Errorf("%s: status %v, want an error", s.Name(), s.Status())
			}
			attrs := attribute.NewSet(s.Attributes()...)
			if got, _ := attrs.Value("error.type"); got.AsString() != "connection_closed" {
				t.Errorf("%s: error.type = %q, want connection_closed", s.Name(), got.AsString())
			}
			return
		}
	}
	t.Fatal("the failed publish made no producer span")
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

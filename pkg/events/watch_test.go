package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/logtest"
)

// emitAll emits evs on rs and returns the stamped events.
func emitAll(t *testing.T, rs *RunStream, evs ...*eventv1.RunEvent) []*eventv1.RunEvent {
	t.Helper()
	out := make([]*eventv1.RunEvent, 0, len(evs))
	for _, ev := range evs {
		got, err := rs.Emit(t.Context(), ev)
		if err != nil {
			t.Fatalf("Emit(%s): %v", Kind(ev), err)
		}
		out = append(out, got)
	}
	return out
}

func TestWatchResumesAfterFromSeq(t *testing.T) {
	env := newTestEnv(t)
	emitted := emitAll(t, env.pub.Run("run-from"), runStarted("go"), turnStarted(1), llmDelta("a"), llmDelta("b"), runFinished())
	// Another run's events must not show up.
	emitAll(t, env.pub.Run("run-other"), runStarted("other"), runFinished())

	tests := []struct {
		fromSeq uint64
		want    []*eventv1.RunEvent
	}{
		{0, emitted},
		{3, emitted[3:]},
		{5, nil}, // run_finished already seen: Watch returns at once
	}
	for _, tt := range tests {
		var got []*eventv1.RunEvent
		err := Watch(t.Context(), env.js, "run-from", tt.fromSeq, func(_ context.Context, ev *eventv1.RunEvent) error {
			got = append(got, ev)
			return nil
		})
		if err != nil {
			t.Fatalf("Watch(from %d): %v", tt.fromSeq, err)
		}
		assertEvents(t, got, tt.want)
	}
}

func TestWatchTailsLiveEvents(t *testing.T) {
	env := newTestEnv(t)
	rs := env.pub.Run("run-live")
	first := emitAll(t, rs, runStarted("go"))

	got := make(chan *eventv1.RunEvent)
	done := make(chan error, 1)
	go func() {
		done <- Watch(t.Context(), env.js, "run-live", 0, func(ctx context.Context, ev *eventv1.RunEvent) error {
			select {
			case got <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	// Once the stored event arrived, Watch is running; everything after is live.
	assertEvents(t, []*eventv1.RunEvent{<-got}, first)

	var live []*eventv1.RunEvent
	for _, ev := range []*eventv1.RunEvent{turnStarted(1), llmDelta("x"), runFinished()} {
		live = append(live, emitAll(t, rs, ev)...)
		assertEvents(t, []*eventv1.RunEvent{<-got}, live[len(live)-1:])
	}
	if err := <-done; err != nil {
		t.Fatalf("Watch returned %v after run_finished, want nil", err)
	}
}

func TestWatchStopsWhenContextEnds(t *testing.T) {
	env := newTestEnv(t)
	emitAll(t, env.pub.Run("run-cancel"), runStarted("go"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	delivered := 0
	err := Watch(ctx, env.js, "run-cancel", 0, func(context.Context, *eventv1.RunEvent) error {
		delivered++
		cancel() // the run never finishes; only ctx ends the watch
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch = %v, want context.Canceled", err)
	}
	if delivered != 1 {
		t.Errorf("delivered %d events, want 1", delivered)
	}
}

func TestWatchReturnsCallbackError(t *testing.T) {
	env := newTestEnv(t)
	emitAll(t, env.pub.Run("run-fail"), runStarted("go"), runFinished())
	errStop := errors.New("subscriber gave up")
	calls := 0
	err := Watch(t.Context(), env.js, "run-fail", 0, func(context.Context, *eventv1.RunEvent) error {
		calls++
		return errStop
	})
	if !errors.Is(err, errStop) || calls != 1 {
		t.Fatalf("Watch = %v after %d calls, want the callback's error after 1 call", err, calls)
	}
}

func TestWatchRejectsInvalidInput(t *testing.T) {
	env := newTestEnv(t)
	noop := func(context.Context, *eventv1.RunEvent) error { return nil }
	assertInvalid(t, Watch(t.Context(), env.js, "run.>", 0, noop), `contains '.'`)
	assertInvalid(t, Watch(t.Context(), env.js, "", 0, noop), "run id must not be empty")
	assertInvalid(t, Watch(t.Context(), env.js, "run-1", 0, nil), "callback must not be nil")
}

func TestWatchContinuesThePublisherTrace(t *testing.T) {
	env := newTestEnv(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("events-test")

	ctx, span := tracer.Start(t.Context(), "agentmesh.run")
	rs := env.pub.Run("run-trace")
	for _, ev := range []*eventv1.RunEvent{runStarted("go"), runFinished()} {
		if _, err := rs.Emit(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	span.End()
	want := span.SpanContext()

	var remotes []trace.SpanContext
	err := Watch(t.Context(), env.js, "run-trace", 0, func(ctx context.Context, _ *eventv1.RunEvent) error {
		remotes = append(remotes, trace.SpanContextFromContext(ctx))
		_, child := tracer.Start(ctx, "subscriber")
		child.End()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(remotes) != 2 {
		t.Fatalf("callback ran %d times, want 2", len(remotes))
	}
	// Each event continues from its publish span, a child of the publisher's span.
	publishes := map[trace.SpanID]bool{}
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindProducer && s.Parent().SpanID() == want.SpanID() {
			publishes[s.SpanContext().SpanID()] = true
		}
	}
	for i, sc := range remotes {
		if !sc.IsRemote() || sc.TraceID() != want.TraceID() || !publishes[sc.SpanID()] {
			t.Errorf("event %d ctx span context = %v/%v (remote %v), want remote %v and a publish span of %v", i, sc.TraceID(), sc.SpanID(), sc.IsRemote(), want.TraceID(), want.SpanID())
		}
	}
	for _, s := range rec.Ended() {
		if s.Name() != "subscriber" {
			continue
		}
		if s.SpanContext().TraceID() != want.TraceID() || !publishes[s.Parent().SpanID()] {
			t.Errorf("subscriber span trace %v parent %v, want trace %v and a publish span as parent",
				s.SpanContext().TraceID(), s.Parent().SpanID(), want.TraceID())
		}
	}
}

// TestWatchSkipsMessagesThatAreNotTheRunsEvents: a message on a run's subjects that is not
// one of its events (bytes that do not decode as a RunEvent, or another run's event published
// by hand on this run's subjects) is skipped and logged with its subject and stream sequence.
// Watch failed on the first one, so a single corrupt or foreign message stored in the stream
// ended every WatchRun and StreamRun of the run, on every replay, for as long as it was kept.
func TestWatchSkipsMessagesThatAreNotTheRunsEvents(t *testing.T) {
	env := newTestEnv(t)
	rs := env.pub.Run("run-bad")
	want := emitAll(t, rs, runStarted("go"))
	corrupt, err := env.js.Publish(t.Context(), Subject("run-bad", "llm_delta"), []byte("not a run event"))
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := proto.Marshal(&eventv1.RunEvent{RunId: "run-other", Seq: 99, Kind: runFinished().Kind})
	if err != nil {
		t.Fatal(err)
	}
	stray, err := env.js.Publish(t.Context(), Subject("run-bad", "run_finished"), foreign)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, emitAll(t, rs, llmDelta("a"), runFinished())...)

	logs := &logtest.Buffer{}
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(logs, nil)))

	var got []*eventv1.RunEvent
	err = Watch(t.Context(), env.js, "run-bad", 0, func(_ context.Context, ev *eventv1.RunEvent) error {
		got = append(got, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("Watch = %v, want nil after run_finished", err)
	}
	assertEvents(t, got, want)
	for _, skipped := range []struct {
		subject string
		seq     uint64
	}{{Subject("run-bad", "llm_delta"), corrupt.Sequence}, {Subject("run-bad", "run_finished"), stray.Sequence}} {
		line := fmt.Sprintf("subject=%s stream_seq=%d", skipped.subject, skipped.seq)
		if n := strings.Count(logs.String(), line); n != 1 {
			t.Errorf("logs name %q %d times, want once:\n%s", line, n, logs)
		}
	}
}

// TestWatchBoundsTheBytesItHolds: a watch replaying a run holds a bounded number of bytes of
// its events in the client while its callback is busy (a gRPC client reading slowly), not
// DefaultMaxMessages (500) events of up to the payload limit each, some 500 MB a watch. Every
// pull request the watch makes asks for at most watchBufferBytes; and events as large as a
// NATS message still reach the callback, all of them, in order.
func TestWatchBoundsTheBytesItHolds(t *testing.T) {
	env := newTestEnv(t)
	pulls, err := env.nc.SubscribeSync("$JS.API.CONSUMER.MSG.NEXT." + StreamName + ".>")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pulls.Unsubscribe() })
	rs := env.pub.Run("run-large")
	big := strings.Repeat("x", int(env.nc.MaxPayload())) // cut down to fit one message
	evs := []*eventv1.RunEvent{runStarted("go")}
	for range 6 {
		evs = append(evs, llmDelta(big))
	}
	emitted := emitAll(t, rs, append(evs, runFinished())...)

	limit := watchBuffer(env.nc)
	if limit <= 0 || limit > 4*int(env.nc.MaxPayload()) {
		t.Fatalf("watchBuffer = %d, want a few NATS messages' worth", limit)
	}
	var seqs []uint64
	collect := func(_ context.Context, ev *eventv1.RunEvent) error {
		seqs = append(seqs, ev.GetSeq())
		return nil
	}
	if err := Watch(t.Context(), env.js, "run-large", 0, collect); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if len(seqs) != len(emitted) {
		t.Fatalf("watched seqs %v, want %d events", seqs, len(emitted))
	}
	for i, s := range seqs {
		if s != emitted[i].GetSeq() {
			t.Fatalf("watched seqs %v, want them in order", seqs)
		}
	}
	for n := 0; ; n++ {
		msg, err := pulls.NextMsg(0)
		if err != nil {
			if n == 0 {
				t.Fatal("the watch made no pull request")
			}
			break
		}
		var req struct {
			Batch    int `json:"batch"`
			MaxBytes int `json:"max_bytes"`
		}
		if err := json.Unmarshal(msg.Data, &req); err != nil {
			t.Fatalf("pull request %q: %v", msg.Data, err)
		}
		if req.MaxBytes <= 0 || req.MaxBytes > limit {
			t.Fatalf("pull request %s asks for %d bytes, want at most %d", msg.Data, req.MaxBytes, limit)
		}
	}
}

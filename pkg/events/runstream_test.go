package events

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

func TestEmitAssignsGapFreeSeqsUnderConcurrency(t *testing.T) {
	env := newTestEnv(t)
	rs := env.pub.Run("run-conc")
	const goroutines, perGoroutine = 20, 5
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[uint64]bool{}
		errs []error
	)
	for g := range goroutines {
		wg.Go(func() {
			for range perGoroutine {
				ev, err := rs.Emit(t.Context(), turnStarted(int32(g)))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					seen[ev.GetSeq()] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("Emit failed: %v", errors.Join(errs...))
	}
	const total = goroutines * perGoroutine
	if got := rs.Seq(); got != total {
		t.Errorf("Seq() = %d, want %d", got, total)
	}
	for seq := uint64(1); seq <= total; seq++ {
		if !seen[seq] {
			t.Errorf("no Emit returned seq %d", seq)
		}
	}
	if got := env.streamMsgs(t); got != total {
		t.Fatalf("stream holds %d messages, want %d", got, total)
	}
	// Publishing is serialised, so stream order is seq order.
	for seq := uint64(1); seq <= total; seq++ {
		ev := &eventv1.RunEvent{}
		if err := proto.Unmarshal(env.storedMsg(t, seq).Data, ev); err != nil {
			t.Fatal(err)
		}
		if ev.GetSeq() != seq {
			t.Fatalf("stream message %d has event seq %d", seq, ev.GetSeq())
		}
	}
}

func TestEmitStampsACopy(t *testing.T) {
	env := newTestEnv(t)
	rs := env.pub.Run("run-stamp")
	in := llmDelta("x")
	got, err := rs.Emit(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if in.GetRunId() != "" || in.GetSeq() != 0 || in.GetTime() != nil {
		t.Errorf("Emit modified its input: %v", in)
	}
	if got.GetRunId() != "run-stamp" || got.GetSeq() != 1 || got.GetTime() == nil {
		t.Errorf("Emit returned %v, want run-stamp seq 1 with a time", got)
	}

	at := timestamppb.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	in = llmDelta("y")
	in.Time = at
	got, err = rs.Emit(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.GetTime(), at) || got.GetSeq() != 2 {
		t.Errorf("Emit returned seq %d time %v, want seq 2 and the time given", got.GetSeq(), got.GetTime())
	}
}

func TestEmitRejectsInvalidInput(t *testing.T) {
	env := newTestEnv(t)
	tests := []struct {
		name    string
		runID   string
		ev      *eventv1.RunEvent
		wantErr string
	}{
		{"nil event", "run-1", nil, "must not be nil"},
		{"no kind", "run-1", &eventv1.RunEvent{}, "has no kind"},
		{"empty run id", "", runFinished(), "run id must not be empty"},
		{"wildcard run id", "run.*", runFinished(), `contains '.'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := env.pub.Run(tt.runID)
			_, err := rs.Emit(t.Context(), tt.ev)
			assertInvalid(t, err, tt.wantErr)
			if rs.Seq() != 0 {
				t.Errorf("Seq() = %d after a rejected event, want 0", rs.Seq())
			}
		})
	}
}

func TestNewRunStreamAtContinuesAResumedRun(t *testing.T) {
	env := newTestEnv(t)
	rs := NewRunStreamAt(env.pub, "run-resume", Position{Seq: 7})
	ev, err := rs.Emit(t.Context(), turnStarted(3))
	if err != nil {
		t.Fatal(err)
	}
	if ev.GetSeq() != 8 || rs.Seq() != 8 {
		t.Errorf("resumed stream emitted seq %d (Seq() %d), want 8", ev.GetSeq(), rs.Seq())
	}
}

func TestEmitSkipsASeqAlreadyStored(t *testing.T) {
	env := newTestEnv(t)
	// An earlier Emit stored seq 1 but reported a failure (lost ack).
	stored := runStarted("landed")
	stored.RunId, stored.Seq = "run-skip", 1
	if err := env.pub.Publish(t.Context(), stored); err != nil {
		t.Fatal(err)
	}
	rs := env.pub.Run("run-skip")
	ev, err := rs.Emit(t.Context(), turnStarted(1))
	if err != nil {
		t.Fatal(err)
	}
	if ev.GetSeq() != 2 || rs.Seq() != 2 {
		t.Errorf("Emit after a stored seq 1 got seq %d (Seq() %d), want 2", ev.GetSeq(), rs.Seq())
	}
	if got := env.streamMsgs(t); got != 2 {
		t.Errorf("stream holds %d messages, want 2", got)
	}
}

// flakyJetStream fails the first failures publishes. With lostAcks a failing publish still
// reaches the server (its ack is lost), otherwise it never leaves the client. After each
// failure it calls onFailure, when set, with the number of failures so far.
type flakyJetStream struct {
	jetstream.JetStream
	lostAcks  bool
	onFailure func(n int)

	mu       sync.Mutex
	failures int
	failed   int
	seqs     []uint64
}

var errInjected = errors.New("injected publish failure")

func (f *flakyJetStream) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ev := &eventv1.RunEvent{}
	if err := proto.Unmarshal(m.Data, ev); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.seqs = append(f.seqs, ev.GetSeq())
	fail := f.failed < f.failures
	if fail {
		f.failed++
	}
	failed := f.failed
	f.mu.Unlock()
	if !fail {
		return f.JetStream.PublishMsg(ctx, m, opts...)
	}
	if f.lostAcks {
		if _, err := f.JetStream.PublishMsg(ctx, m, opts...); err != nil {
			return nil, err
		}
	}
	if f.onFailure != nil {
		f.onFailure(failed)
	}
	return nil, errInjected
}

// attempts returns the seqs the publish attempts carried.
func (f *flakyJetStream) attempts() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seqs)
}

// flakyPublisher returns a Publisher on env whose publishes fail as flaky says, retrying
// within milliseconds.
func flakyPublisher(env *testEnv, flaky *flakyJetStream) *Publisher {
	flaky.JetStream = env.js
	return &Publisher{js: flaky, retry: backoff{initial: time.Millisecond, ceiling: 4 * time.Millisecond}}
}

func TestEmitRetriesWithTheSameSeqUntilStored(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		lostAcks bool
		wantSeqs []uint64
	}{
		{"lost acks are deduplicated", 2, true, []uint64{1, 1, 1}},
		{"failed publishes are retried", 3, false, []uint64{1, 1, 1, 1}},
		{"retries do not stop after a few", 12, false, slices.Repeat([]uint64{1}, 13)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			flaky := &flakyJetStream{lostAcks: tt.lostAcks, failures: tt.failures}
			rs := flakyPublisher(env, flaky).Run("run-retry")
			ev, err := rs.Emit(t.Context(), runStarted("hi"))
			if err != nil || ev.GetSeq() != 1 {
				t.Fatalf("Emit = seq %d, %v; want seq 1", ev.GetSeq(), err)
			}
			if got := flaky.attempts(); !slices.Equal(got, tt.wantSeqs) {
				t.Fatalf("publish attempts carried seqs %v, want %v", got, tt.wantSeqs)
			}
			if got := env.streamMsgs(t); got != 1 {
				t.Errorf("stream holds %d messages, want 1", got)
			}
			if got := rs.Seq(); got != 1 {
				t.Errorf("Seq() = %d, want 1", got)
			}
		})
	}
}

func TestEmitThatGivesUpNeverLetsItsSeqBeReused(t *testing.T) {
	tests := []struct {
		name     string
		lostAcks bool
		wantMsgs []uint64 // seqs of the events stored
	}{
		{"attempts never stored", false, []uint64{2}},
		// The issue this guards against: the next event reused seq 1 and its Nats-Msg-Id, so
		// JetStream dropped it as a duplicate of the attempt that had landed.
		{"an attempt stored with its ack lost", true, []uint64{1, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			flaky := &flakyJetStream{lostAcks: tt.lostAcks, failures: 3, onFailure: func(n int) {
				if n == 3 {
					cancel() // the caller gives up during the third attempt
				}
			}}
			rs := flakyPublisher(env, flaky).Run("run-gaveup")
			if _, err := rs.Emit(ctx, runStarted("lost")); !errors.Is(err, errInjected) || !errors.Is(err, context.Canceled) {
				t.Fatalf("Emit = %v, want the publish failure and context.Canceled", err)
			}
			if got := rs.Seq(); got != 1 {
				t.Fatalf("Seq() after giving up = %d, want 1 (the seq tried counts as used)", got)
			}
			ev, err := rs.Emit(t.Context(), runFinished())
			if err != nil || ev.GetSeq() != 2 {
				t.Fatalf("next Emit = seq %d, %v; want seq 2", ev.GetSeq(), err)
			}
			if got := storedSeqs(t, env.js, "run-gaveup"); !slices.Equal(got, tt.wantMsgs) {
				t.Errorf("stored seqs %v, want %v", got, tt.wantMsgs)
			}
		})
	}
}

func TestEmitDoesNotRetryInvalidEvents(t *testing.T) {
	env := newTestEnv(t)
	flaky := &flakyJetStream{}
	rs := flakyPublisher(env, flaky).Run("run-invalid")
	bad := llmDelta("\xff not UTF-8")
	if _, err := rs.Emit(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "encode llm_delta event") {
		t.Fatalf("Emit(invalid UTF-8) = %v, want an encoding error", err)
	}
	if got := flaky.attempts(); len(got) != 0 || rs.Seq() != 0 {
		t.Errorf("an event that cannot be encoded was published %v times (Seq() %d), want never", got, rs.Seq())
	}
}

func TestLastPosition(t *testing.T) {
	env := newTestEnv(t)
	if got, err := LastPosition(t.Context(), env.js, "run-1"); err != nil || got != (Position{}) {
		t.Fatalf("LastPosition of a run without events = %+v, %v; want none", got, err)
	}
	publish := func(runID string, seqs ...uint64) {
		for _, seq := range seqs {
			ev := turnStarted(1)
			ev.RunId, ev.Seq = runID, seq
			if err := env.pub.Publish(t.Context(), ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish("run-1", 1, 2, 5) // a gap: seqs 3 and 4 were given up
	publish("run-10", 9)      // a run whose id starts with the other's, published last
	publish("run-2", 1)
	for runID, want := range map[string]Position{"run-1": {5, 3}, "run-10": {9, 4}, "run-2": {1, 5}, "run-3": {}} {
		if got, err := LastPosition(t.Context(), env.js, runID); err != nil || got != want {
			t.Errorf("LastPosition(%s) = %+v, %v; want %+v", runID, got, err, want)
		}
	}

	ev, err := NewRunStreamAt(env.pub, "run-1", Position{Seq: 5, StreamSeq: 3}).Emit(t.Context(), runFinished())
	if err != nil || ev.GetSeq() != 6 {
		t.Fatalf("resumed Emit = seq %d, %v; want 6", ev.GetSeq(), err)
	}

	_, err = LastPosition(t.Context(), env.js, "run.*")
	assertInvalid(t, err, `contains '.'`)

	if err := env.js.DeleteStream(t.Context(), StreamName); err != nil {
		t.Fatal(err)
	}
	if got, err := LastPosition(t.Context(), env.js, "run-1"); err != nil || got != (Position{}) {
		t.Errorf("LastPosition without the stream = %+v, %v; want none", got, err)
	}
}

func TestPublishCreatesADeletedStreamAgain(t *testing.T) {
	env := newTestEnv(t)
	rs := env.pub.Run("run-deleted")
	emitAll(t, rs, runStarted("go"))
	if err := env.js.DeleteStream(t.Context(), StreamName); err != nil {
		t.Fatal(err)
	}
	ev, err := rs.Emit(t.Context(), runFinished())
	if err != nil || ev.GetSeq() != 2 {
		t.Fatalf("Emit after the stream was deleted = seq %d, %v; want seq 2 stored", ev.GetSeq(), err)
	}
	if got := storedSeqs(t, env.js, "run-deleted"); !slices.Equal(got, []uint64{2}) {
		t.Errorf("stored seqs %v, want [2]", got)
	}
}

// TestStampableCopiesEveryField: stampable copies RunEvent's fields by name, so a field added
// to RunEvent must be added there too; every field set on the event must come out equal.
func TestStampableCopiesEveryField(t *testing.T) {
	ev := &eventv1.RunEvent{Kind: &eventv1.RunEvent_TurnStarted{TurnStarted: &eventv1.TurnStarted{Turn: 3}}}
	m := ev.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil {
			continue // the kind, set above
		}
		switch fd.Kind() {
		case protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString("x"))
		case protoreflect.Uint64Kind:
			m.Set(fd, protoreflect.ValueOfUint64(7))
		case protoreflect.MessageKind:
			m.Set(fd, protoreflect.ValueOfMessage(timestamppb.Now().ProtoReflect()))
		default:
			t.Fatalf("RunEvent.%s is a %s: give the test a value of it, and stampable the field", fd.Name(), fd.Kind())
		}
	}
	out := stampable(ev)
	if !proto.Equal(out, ev) {
		t.Errorf("stampable(%v) = %v: a field is not copied", ev, out)
	}
	if out == ev || out.GetTurnStarted() != ev.GetTurnStarted() {
		t.Error("stampable must return a new event sharing the payload")
	}
}

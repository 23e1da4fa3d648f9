package events

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
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
	rs := NewRunStreamAt(env.pub, "run-resume", 7)
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

// flakyJetStream fails the first failures publishes; when store is set a failing publish still
// reaches the server (the ack is lost), otherwise it never leaves the client.
type flakyJetStream struct {
	jetstream.JetStream
	store bool

	mu       sync.Mutex
	failures int
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
	fail := f.failures > 0
	f.failures--
	f.mu.Unlock()
	if !fail {
		return f.JetStream.PublishMsg(ctx, m, opts...)
	}
	if f.store {
		if _, err := f.JetStream.PublishMsg(ctx, m, opts...); err != nil {
			return nil, err
		}
	}
	return nil, errInjected
}

func TestEmitRetriesWithTheSameSeq(t *testing.T) {
	tests := []struct {
		name      string
		failures  int
		store     bool
		wantErr   bool
		wantSeqs  []uint64
		wantMsgs  uint64
		wantRSSeq uint64
	}{
		{"lost acks are deduplicated", 2, true, false, []uint64{1, 1, 1}, 1, 1},
		{"failed publishes are retried", 3, false, false, []uint64{1, 1, 1, 1}, 1, 1},
		{"gives up after 3 retries", 4, false, true, []uint64{1, 1, 1, 1}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			flaky := &flakyJetStream{JetStream: env.js, store: tt.store, failures: tt.failures}
			rs := NewRunStreamAt(&Publisher{js: flaky}, "run-retry", 0)
			rs.backoff = time.Millisecond
			ev, err := rs.Emit(t.Context(), runStarted("hi"))
			if tt.wantErr {
				if !errors.Is(err, errInjected) {
					t.Fatalf("Emit error = %v, want the publish failure", err)
				}
			} else if err != nil || ev.GetSeq() != 1 {
				t.Fatalf("Emit = seq %d, %v; want seq 1", ev.GetSeq(), err)
			}
			flaky.mu.Lock()
			seqs := flaky.seqs
			flaky.mu.Unlock()
			if len(seqs) != len(tt.wantSeqs) {
				t.Fatalf("publish attempts carried seqs %v, want %v", seqs, tt.wantSeqs)
			}
			for i := range seqs {
				if seqs[i] != tt.wantSeqs[i] {
					t.Fatalf("publish attempts carried seqs %v, want %v", seqs, tt.wantSeqs)
				}
			}
			if got := env.streamMsgs(t); got != tt.wantMsgs {
				t.Errorf("stream holds %d messages, want %d", got, tt.wantMsgs)
			}
			if got := rs.Seq(); got != tt.wantRSSeq {
				t.Errorf("Seq() = %d, want %d", got, tt.wantRSSeq)
			}
		})
	}
}

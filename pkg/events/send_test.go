package events

import (
	"slices"
	"sync"
	"testing"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

// handedOn records the seqs of the events a RunStream hands on after storing them.
type handedOn struct {
	mu   sync.Mutex
	seqs []uint64
}

func (h *handedOn) take(ev *eventv1.RunEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seqs = append(h.seqs, ev.GetSeq())
}

func (h *handedOn) got() []uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seqs)
}

func seqsUpTo(n uint64) []uint64 {
	var seqs []uint64
	for seq := uint64(1); seq <= n; seq++ {
		seqs = append(seqs, seq)
	}
	return seqs
}

func TestSendStoresEventsInSeqOrderAndHandsThemOnOnceStored(t *testing.T) {
	env := newTestEnv(t)
	rs := env.pub.Run("run-send")
	var h handedOn
	const n = 50
	for i := range n {
		if err := rs.Send(t.Context(), turnStarted(int32(i)), h.take); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := storedSeqs(t, env.js, "run-send"); !slices.Equal(got, seqsUpTo(n)) {
		t.Errorf("stored seqs %v, want 1 to %d in order", got, n)
	}
	if got := h.got(); !slices.Equal(got, seqsUpTo(n)) {
		t.Errorf("handed on %v, want 1 to %d in order", got, n)
	}
	if rs.Seq() != n {
		t.Errorf("Seq() = %d, want %d", rs.Seq(), n)
	}
}

// TestSendPublishesAFailedEventAgainBeforeTheNext: an event whose attempt failed (the stream
// was gone) is published again, and stored, before the event sent after it.
func TestSendPublishesAFailedEventAgainBeforeTheNext(t *testing.T) {
	env := newTestEnv(t)
	rs := env.pub.Run("run-send-again")
	var h handedOn
	if err := rs.Send(t.Context(), runStarted("go"), h.take); err != nil {
		t.Fatal(err)
	}
	if err := rs.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := env.js.DeleteStream(t.Context(), StreamName); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []*eventv1.RunEvent{turnStarted(1), runFinished()} {
		if err := rs.Send(t.Context(), ev, h.take); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := storedSeqs(t, env.js, "run-send-again"); !slices.Equal(got, []uint64{2, 3}) {
		t.Errorf("stored seqs %v, want [2 3]: seq 2 again, then seq 3", got)
	}
	if got := h.got(); !slices.Equal(got, seqsUpTo(3)) {
		t.Errorf("handed on %v, want [1 2 3]", got)
	}
}

// TestEmitAfterSendStoresTheSentEventFirst: Emit publishes only once the event sent before it
// is stored.
func TestEmitAfterSendStoresTheSentEventFirst(t *testing.T) {
	env := newTestEnv(t)
	rs := env.pub.Run("run-send-emit")
	var h handedOn
	if err := rs.Send(t.Context(), runStarted("go"), h.take); err != nil {
		t.Fatal(err)
	}
	ev, err := rs.Emit(t.Context(), runFinished())
	if err != nil || ev.GetSeq() != 2 {
		t.Fatalf("Emit = seq %d, %v; want seq 2", ev.GetSeq(), err)
	}
	if got := h.got(); !slices.Equal(got, []uint64{1}) {
		t.Errorf("handed on %v before Emit returned, want [1]", got)
	}
	if got := storedSeqs(t, env.js, "run-send-emit"); !slices.Equal(got, []uint64{1, 2}) {
		t.Errorf("stored seqs %v, want [1 2]", got)
	}
}

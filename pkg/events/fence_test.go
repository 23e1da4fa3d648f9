package events

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

// ownedBy is an Owner that says the run is name's while owner holds name.
func ownedBy(owner *atomic.Value, name string) RunOption {
	return WithOwner(func(context.Context, string) (bool, error) { return owner.Load() == name, nil }, nil)
}

// TestAStaleWriterIsFenced: replica a publishes a run's events, b takes the run over (the
// owner says so) and continues from the last event it reads. An event a stores before b's
// first one stays (b goes on after it); once b has stored one, a's next is refused with
// ErrFenced and not stored, and the run's events stay numbered 1, 2, 3 … without gaps.
func TestAStaleWriterIsFenced(t *testing.T) {
	env := newTestEnv(t)
	const runID = "run-fenced"
	var owner atomic.Value
	owner.Store("a")
	a := env.pub.Run(runID, ownedBy(&owner, "a"))
	emitAll(t, a, runStarted("go"), turnStarted(1))

	owner.Store("b")
	at, err := LastPosition(t.Context(), env.js, runID)
	if err != nil {
		t.Fatal(err)
	}
	b := NewRunStreamAt(env.pub, runID, at, ownedBy(&owner, "b"))
	if ev, err := a.Emit(t.Context(), llmDelta("stale")); err != nil || ev.GetSeq() != 3 {
		t.Fatalf("a's Emit before b's first = seq %d, %v; want seq 3 stored", ev.GetSeq(), err)
	}
	if ev, err := b.Emit(t.Context(), turnStarted(2)); err != nil || ev.GetSeq() != 4 {
		t.Fatalf("b's first Emit = seq %d, %v; want seq 4, after a's event", ev.GetSeq(), err)
	}
	if _, err := a.Emit(t.Context(), llmDelta("lost")); !errors.Is(err, ErrFenced) {
		t.Fatalf("a's Emit after b's = %v, want ErrFenced", err)
	}
	if ev, err := b.Emit(t.Context(), runFinished()); err != nil || ev.GetSeq() != 5 {
		t.Fatalf("b's next Emit = seq %d, %v; want seq 5", ev.GetSeq(), err)
	}
	if got := storedSeqs(t, env.js, runID); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("stored seqs %v, want 1 to 5", got)
	}
}

// TestAnOwnerThatCannotBeReadIsAskedAgain: a RunStream that finds another writer's event
// after its own asks its owner, and while the owner cannot be read it retries, as a publish
// that fails.
func TestAnOwnerThatCannotBeReadIsAskedAgain(t *testing.T) {
	env := newTestEnv(t)
	const runID = "run-owner-down"
	var asked atomic.Int64
	owns := WithOwner(func(context.Context, string) (bool, error) {
		if asked.Add(1) < 3 {
			return false, errors.New("the store is down")
		}
		return true, nil
	}, nil)
	other := env.pub.Run(runID)
	emitAll(t, other, runStarted("elsewhere"))
	rs := flakyPublisher(env, &flakyJetStream{}).Run(runID, owns)
	ev, err := rs.Emit(t.Context(), turnStarted(1))
	if err != nil || ev.GetSeq() != 2 {
		t.Fatalf("Emit = seq %d, %v; want seq 2, after the other writer's", ev.GetSeq(), err)
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("the owner was asked %d times, want 3 (two failures, then the answer)", n)
	}
}

// TestAFencedRunGoesOnWhenTheStreamLostItsEvents: a run whose earlier events are gone from the
// stream (its limits, or NATS lost its store) publishes its next event after what is left.
func TestAFencedRunGoesOnWhenTheStreamLostItsEvents(t *testing.T) {
	env := newTestEnv(t)
	const runID = "run-purged"
	rs := env.pub.Run(runID, WithOwner(func(context.Context, string) (bool, error) { return false, nil }, nil))
	emitAll(t, rs, runStarted("go"), turnStarted(1))
	s, err := env.js.Stream(t.Context(), StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(t.Context(), jetstream.WithPurgeSubject(runFilter(runID))); err != nil {
		t.Fatal(err)
	}
	if ev, err := rs.Emit(t.Context(), runFinished()); err != nil || ev.GetSeq() != 3 {
		t.Fatalf("Emit after the purge = seq %d, %v; want seq 3 stored", ev.GetSeq(), err)
	}
	if got := storedSeqs(t, env.js, runID); !slices.Equal(got, []uint64{3}) {
		t.Errorf("stored seqs %v, want [3]", got)
	}
}

// TestServerFences: fencing needs nats-server 2.11 or later, which checks the expected last
// sequence of a subject filter.
func TestServerFences(t *testing.T) {
	for v, want := range map[string]bool{
		"2.15.2": true, "2.11.0": true, "2.11.0-beta.1": true, "3.0.0": true,
		"2.10.24": false, "1.4.1": false, "": false, "v2.11.0": false,
	} {
		if got := serverFences(v); got != want {
			t.Errorf("serverFences(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestAFencedAttemptWhoseAckWasLostIsFoundStored: the attempt after one stored though its ack
// was lost is refused by the fence, as that first attempt is the run's last event; Emit finds
// it stored, without asking the owner, and the next event goes after it.
func TestAFencedAttemptWhoseAckWasLostIsFoundStored(t *testing.T) {
	env := newTestEnv(t)
	flaky := &flakyJetStream{lostAcks: true, failures: 1}
	var asked atomic.Int64
	rs := flakyPublisher(env, flaky).Run("run-lost-ack", WithOwner(func(context.Context, string) (bool, error) {
		asked.Add(1)
		return true, nil
	}, nil))
	if ev, err := rs.Emit(t.Context(), runStarted("hi")); err != nil || ev.GetSeq() != 1 {
		t.Fatalf("Emit = seq %d, %v; want seq 1", ev.GetSeq(), err)
	}
	if ev, err := rs.Emit(t.Context(), runFinished()); err != nil || ev.GetSeq() != 2 {
		t.Fatalf("next Emit = seq %d, %v; want seq 2", ev.GetSeq(), err)
	}
	if got := flaky.attempts(); !slices.Equal(got, []uint64{1, 1, 2}) {
		t.Errorf("publish attempts carried seqs %v, want [1 1 2]", got)
	}
	if got := storedSeqs(t, env.js, "run-lost-ack"); !slices.Equal(got, []uint64{1, 2}) {
		t.Errorf("stored seqs %v, want [1 2]", got)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the owner was asked %d times, want never", n)
	}
}

// TestAStreamFencesOnlyWhileItsFencingSaysSo: a RunStream whose fencing reports false stores
// its events as an unfenced one does, after another writer's too; once fencing reports true,
// its next event is refused.
func TestAStreamFencesOnlyWhileItsFencingSaysSo(t *testing.T) {
	env := newTestEnv(t)
	const runID = "run-fencing"
	var fencing atomic.Bool
	stale := env.pub.Run(runID, WithOwner(func(context.Context, string) (bool, error) { return false, nil }, fencing.Load))
	emitAll(t, stale, runStarted("go"))
	emitAll(t, NewRunStreamAt(env.pub, runID, Position{Seq: 1, StreamSeq: 1}), turnStarted(1)) // the new owner
	if ev, err := stale.Emit(t.Context(), llmDelta("unfenced")); err != nil || ev.GetSeq() != 3 {
		t.Fatalf("Emit while not fencing = seq %d, %v; want it stored after the other writer's seq 2", ev.GetSeq(), err)
	}
	emitAll(t, NewRunStreamAt(env.pub, runID, Position{Seq: 3, StreamSeq: 3}), turnStarted(2))
	fencing.Store(true)
	if _, err := stale.Emit(t.Context(), llmDelta("fenced")); !errors.Is(err, ErrFenced) {
		t.Fatalf("Emit once fencing = %v, want ErrFenced", err)
	}
}

// TestLastPositionLooksPastAMessageThatIsNoEvent: when the last message on a run's subjects is
// no event of the run (bytes that do not decode, published by hand), LastPosition gives the
// seq of the run's last event and the stream sequence of that message, so a resumed
// RunStream numbers its next event after the run's and its fence lets it through. It failed
// on the message's decoding, so the run could not be resumed, and WatchRun of the finished
// run failed (STORAGE_ERROR) before it watched.
func TestLastPositionLooksPastAMessageThatIsNoEvent(t *testing.T) {
	env := newTestEnv(t)
	const runID = "run-junk-last"
	emitAll(t, env.pub.Run(runID), runStarted("go"), turnStarted(1), llmDelta("a"))
	junk, err := env.js.Publish(t.Context(), Subject(runID, "junk"), []byte("not a run event"))
	if err != nil {
		t.Fatal(err)
	}
	at, err := LastPosition(t.Context(), env.js, runID)
	if err != nil || at != (Position{Seq: 3, StreamSeq: junk.Sequence}) {
		t.Fatalf("LastPosition = %+v, %v; want seq 3 at stream sequence %d", at, err, junk.Sequence)
	}
	var owner atomic.Value
	owner.Store("b")
	b := NewRunStreamAt(env.pub, runID, at, ownedBy(&owner, "b"))
	if ev, err := b.Emit(t.Context(), runFinished()); err != nil || ev.GetSeq() != 4 {
		t.Fatalf("the resumed run's Emit = seq %d, %v; want seq 4", ev.GetSeq(), err)
	}
}

// TestAFencedRunGoesOnPastAMessageThatIsNoEvent: a message that is no event of a run,
// published on its subjects while it runs (by hand, or another run's event), makes JetStream
// refuse the run's next fenced event, as an event of another writer would; the run goes on
// after it with its own next seq. Settling the refusal read the message's seq and failed on
// its decoding, and Emit retried that until its ctx ended: the run stored no event again.
func TestAFencedRunGoesOnPastAMessageThatIsNoEvent(t *testing.T) {
	env := newTestEnv(t)
	const runID = "run-junk-mid"
	var owner atomic.Value
	owner.Store("a")
	rs := env.pub.Run(runID, ownedBy(&owner, "a"))
	emitAll(t, rs, runStarted("go"), turnStarted(1))
	foreign, err := proto.Marshal(&eventv1.RunEvent{RunId: "run-other", Seq: 99, Kind: llmDelta("x").Kind})
	if err != nil {
		t.Fatal(err)
	}
	for i, data := range [][]byte{[]byte("not a run event"), foreign} {
		if _, err := env.js.Publish(t.Context(), Subject(runID, "junk"), data); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		ev, err := rs.Emit(ctx, llmDelta("next"))
		cancel()
		if want := uint64(3 + i); err != nil || ev.GetSeq() != want {
			t.Fatalf("Emit after stray message %d = seq %d, %v; want seq %d", i+1, ev.GetSeq(), err, want)
		}
	}
	if got := storedSeqs(t, env.js, runID); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Errorf("stored seqs %v, want 1 to 4", got)
	}
}

package runstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAFinishedRunLeavesATombstoneForItsLifetime: Finish removes a finished run's checkpoint,
// its object and its index entry, and leaves its tombstone, which Load and State return and
// which keeps its id taken, until the tombstone's lifetime ends: then the store holds nothing
// of the run. Before, the tombstone replaced the checkpoint in a bucket without a TTL, for good.
func TestAFinishedRunLeavesATombstoneForItsLifetime(t *testing.T) {
	const lifetime = time.Second
	s, js := openConfig(t, runstore.Config{Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: time.Minute, IdempotencyTTL: time.Hour, FinishedTTL: lifetime})
	ctx := t.Context()
	h, err := s.Create(ctx, checkpoint("done", checkpointv1.Phase_PHASE_STARTED, 0))
	if err != nil {
		t.Fatal(err)
	}
	fin := checkpoint("done", checkpointv1.Phase_PHASE_FINISHED, 1)
	fin.Result = &typev1.RunResult{RunId: "done", Conversation: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: string(make([]byte, 2<<20))}}}
	if err := s.Save(ctx, fin, h); err != nil { // too large for an entry: its body is an object
		t.Fatal(err)
	}
	tomb := checkpoint("done", checkpointv1.Phase_PHASE_FINISHED, 1)
	tomb.ResultSaved = true
	if err := s.Finish(ctx, tomb, h); err != nil {
		t.Fatal(err)
	}

	checkpoints, err := js.KeyValue(ctx, runstore.CheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoints.Get(ctx, "done"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the finished run's checkpoint is still stored: %v", err)
	}
	bodies, err := js.ObjectStore(ctx, runstore.BodyBucket)
	if err != nil {
		t.Fatal(err)
	}
	if objects, _ := bodies.List(ctx); len(objects) != 0 {
		t.Errorf("the finished run's checkpoint body is still stored: %d objects", len(objects))
	}
	if ids, err := s.Active(ctx); err != nil || slices.Contains(ids, "done") {
		t.Errorf("Active = %v, %v; want the finished run gone", ids, err)
	}
	cp, head, err := s.Load(ctx, "done")
	if err != nil || head == nil || cp.GetPhase() != checkpointv1.Phase_PHASE_FINISHED || !cp.GetResultSaved() || cp.GetResult() != nil {
		t.Fatalf("Load = %v, %v, %v; want the tombstone", cp, head, err)
	}
	if st, err := s.State(ctx, "done"); err != nil || !st.GetResultSaved() {
		t.Errorf("State = %v, %v; want the tombstone", st, err)
	}
	if taken, err := s.Taken(ctx, "done"); err != nil || !taken {
		t.Errorf("Taken = %t, %v; want the finished run's id taken", taken, err)
	}
	if taken, err := s.Taken(ctx, "never"); err != nil || taken {
		t.Errorf("Taken of an unknown id = %t, %v; want free", taken, err)
	}

	eventually(t, "the tombstone expires", func() bool {
		taken, err := s.Taken(ctx, "done")
		return err == nil && !taken
	})
	if _, _, err := s.Load(ctx, "done"); !errors.Is(err, runstore.ErrNotFound) {
		t.Errorf("Load after the tombstone's lifetime = %v; want ErrNotFound", err)
	}
}

// TestDiscardRemovesACreatedRun: Discard removes the checkpoint and the index entry Create
// stored, for a run that may not go on (its id was a retired run's).
func TestDiscardRemovesACreatedRun(t *testing.T) {
	s, _ := open(t, time.Minute)
	ctx := t.Context()
	if _, err := s.Create(ctx, checkpoint("taken", checkpointv1.Phase_PHASE_STARTED, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(ctx, "taken"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(ctx, "taken"); !errors.Is(err, runstore.ErrNotFound) {
		t.Errorf("Load after Discard = %v; want ErrNotFound", err)
	}
	if ids, err := s.Active(ctx); err != nil || len(ids) != 0 {
		t.Errorf("Active after Discard = %v, %v; want none", ids, err)
	}
}

// TestDiscardRemovesTheRunsLog: a first checkpoint whose request, contract and tools outgrow
// the entry writes a segment of the run's log; Discard removes it with the checkpoint. The
// log's stream has no limits, so a segment left there stayed for good.
func TestDiscardRemovesTheRunsLog(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	g := newGrowing("taken")
	g.cp.Available = []*typev1.Tool{{Name: "t", Description: strings.Repeat("d", 12<<10)}} // a tail over 8 KiB
	if _, err := s.Create(ctx, g.cp); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, runstore.LogStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs == 0 {
		t.Fatalf("the log holds %v segments (%v) after Create; the test wants one", info.State.Msgs, err)
	}
	if err := s.Discard(ctx, "taken"); err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("after Discard the log holds %d messages (%v); want none", info.State.Msgs, err)
	}
}

// TestASaveAfterTheRunRetiredConflicts: a replica that still runs a run another replica
// finished and retired gets ErrConflict at its next checkpoint, as while the checkpoint was
// there, and does not write the checkpoint again as if NATS had lost it (it ran the run to a
// second end: two run_finished events in TestRollingRestart).
func TestASaveAfterTheRunRetiredConflicts(t *testing.T) {
	s, _ := open(t, time.Minute)
	ctx := t.Context()
	stale, err := s.Create(ctx, checkpoint("twice", checkpointv1.Phase_PHASE_STARTED, 0))
	if err != nil {
		t.Fatal(err)
	}
	_, winner, err := s.Load(ctx, "twice")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, checkpoint("twice", checkpointv1.Phase_PHASE_FINISHED, 1), winner); err != nil {
		t.Fatal(err)
	}
	tomb := checkpoint("twice", checkpointv1.Phase_PHASE_FINISHED, 1)
	tomb.ResultSaved = true
	if err := s.Finish(ctx, tomb, winner); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, checkpoint("twice", checkpointv1.Phase_PHASE_READY, 0), stale); !errors.Is(err, runstore.ErrConflict) {
		t.Fatalf("Save at a head the retired run left behind = %v; want ErrConflict", err)
	}
	if cp, _, err := s.Load(ctx, "twice"); err != nil || !cp.GetResultSaved() {
		t.Errorf("Load = %v, %v; want the tombstone, not a checkpoint written again", cp, err)
	}
}

// TestAwaitOfARunThatIsNotThere: Await ends ErrNotFound, at once, for a run that has no
// checkpoint, and as soon as the run it waits on is discarded; it waited out its caller's
// deadline (a CancelRun of a run discarded after its first read). AwaitStored, for a run
// whose idempotency key is claimed, waits for its first checkpoint.
func TestAwaitOfARunThatIsNotThere(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, runstore.CheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	finished := func(cp *checkpointv1.RunCheckpoint) bool { return cp.GetPhase() == checkpointv1.Phase_PHASE_FINISHED }
	if _, err := s.Await(ctx, "none", finished); !errors.Is(err, runstore.ErrNotFound) {
		t.Fatalf("Await of a run without a checkpoint = %v; want ErrNotFound", err)
	}

	if _, err := s.Create(ctx, checkpoint("discarded", checkpointv1.Phase_PHASE_STARTED, 0)); err != nil {
		t.Fatal(err)
	}
	read, awaited := make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		_, err := s.Await(ctx, "discarded", func(cp *checkpointv1.RunCheckpoint) bool {
			once.Do(func() { close(read) }) // read once: waiting
			return finished(cp)
		})
		awaited <- err
	}()
	<-read
	// As Discard does first; it then drops the marker from the bucket's stream, which a watch
	// may not have delivered by then.
	if err := kv.Purge(ctx, "discarded"); err != nil {
		t.Fatal(err)
	}
	if err := <-awaited; !errors.Is(err, runstore.ErrNotFound) {
		t.Fatalf("Await of a run purged while waited = %v; want ErrNotFound", err)
	}

	stored := make(chan error, 1)
	go func() { stored <- s.AwaitStored(ctx, "later") }()
	if _, err := s.Create(ctx, checkpoint("later", checkpointv1.Phase_PHASE_STARTED, 0)); err != nil {
		t.Fatal(err)
	}
	if err := <-stored; err != nil {
		t.Fatalf("AwaitStored of a run created meanwhile = %v; want nil", err)
	}
}

// TestDiscardRemovesTheRunsInputs: a cancellation (or a decision) recorded for a run that is
// then discarded goes with it. The inputs' bucket has no TTL: what Discard left there stayed for
// good, and every replica's input watch replayed it at every start.
func TestDiscardRemovesTheRunsInputs(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	if _, err := s.Create(ctx, checkpoint("taken", checkpointv1.Phase_PHASE_STARTED, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: "taken", Reason: "stop"}, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(ctx, "taken"); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_"+runstore.InputBucket)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("after Discard the inputs' bucket holds %d messages (%v); want none", info.State.Msgs, err)
	}
}

// TestAnInputForARetiredRunIsNotKept: a decision, an answer or a cancellation recorded once its
// run has retired (the API read the run waiting, then the run ended and retired before the
// input was written) is ErrNotFound, and removed: it stayed for good in the inputs' bucket,
// which has no TTL, replayed to every replica's input watch, and its caller was told it was
// accepted. An input of a run not yet retired is kept.
func TestAnInputForARetiredRunIsNotKept(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	for _, id := range []string{"retired", "paused"} {
		if _, err := s.Create(ctx, checkpoint(id, checkpointv1.Phase_PHASE_AWAITING_APPROVAL, 1)); err != nil {
			t.Fatal(err)
		}
	}
	tomb := checkpoint("retired", checkpointv1.Phase_PHASE_FINISHED, 1)
	tomb.ResultSaved = true
	if err := s.Finish(ctx, tomb, nil); err != nil {
		t.Fatal(err)
	}
	// The cancellation comes last: an input recorded after it is ErrCancelled.
	inputs := []struct {
		name   string
		record func(run string) error
	}{
		{"a decision", func(run string) error {
			return s.Decide(ctx, &agentv1.ResolveApprovalRequest{RunId: run, CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}, "")
		}},
		{"an answer", func(run string) error {
			return s.Answer(ctx, &agentv1.AnswerRequest{RunId: run, QuestionId: "q", Answer: "yes"}, "")
		}},
		{"a cancellation", func(run string) error {
			return s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: run, Reason: "stop"}, "")
		}},
	}
	st, err := js.Stream(ctx, "KV_"+runstore.InputBucket)
	if err != nil {
		t.Fatal(err)
	}
	kept := func(run string) int {
		t.Helper()
		info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV."+runstore.InputBucket+"."+run+".>"))
		if err != nil {
			t.Fatal(err)
		}
		return len(info.State.Subjects)
	}
	for _, in := range inputs {
		if err := in.record("retired"); !errors.Is(err, runstore.ErrNotFound) {
			t.Errorf("%s for a retired run = %v; want ErrNotFound", in.name, err)
		}
		if err := in.record("paused"); err != nil {
			t.Errorf("%s for a paused run = %v", in.name, err)
		}
	}
	if n := kept("retired"); n != 0 {
		t.Errorf("the retired run has %d inputs kept; want none", n)
	}
	if n := kept("paused"); n != len(inputs) {
		t.Errorf("the paused run has %d inputs kept; want %d", n, len(inputs))
	}
}

// TestSweepInputsPurgesThoseOfRunsWithoutACheckpoint: inputs left behind for a run that has
// retired (their writer stopped before it found the run gone) are purged by SweepInputs; those
// of an active run, and of a run with a checkpoint but no entry in the index (an earlier
// release's), stay.
func TestSweepInputsPurgesThoseOfRunsWithoutACheckpoint(t *testing.T) {
	s, js := open(t, time.Minute)
	ctx := t.Context()
	for _, id := range []string{"retired", "active", "earlier-release"} {
		if _, err := s.Create(ctx, checkpoint(id, checkpointv1.Phase_PHASE_AWAITING_APPROVAL, 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: id}, ""); err != nil {
			t.Fatal(err)
		}
	}
	tomb := checkpoint("retired", checkpointv1.Phase_PHASE_FINISHED, 1)
	tomb.ResultSaved = true
	if err := s.Finish(ctx, tomb, nil); err != nil {
		t.Fatal(err)
	}
	// A cancellation whose writer stopped before it found the run retired.
	inputs, err := js.KeyValue(ctx, runstore.InputBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inputs.Put(ctx, "retired.cancel", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Retire(ctx, "earlier-release", nil); err != nil { // out of the index (and its inputs)
		t.Fatal(err)
	}
	if err := s.RequestCancel(ctx, &agentv1.CancelRunRequest{RunId: "earlier-release"}, ""); err != nil {
		t.Fatal(err)
	}
	purged, err := s.SweepInputs(ctx)
	if err != nil || !slices.Equal(purged, []string{"retired"}) {
		t.Fatalf("SweepInputs = %v, %v; want the retired run's inputs purged", purged, err)
	}
	st, err := js.Stream(ctx, "KV_"+runstore.InputBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV."+runstore.InputBucket+".>"))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for subject := range info.State.Subjects {
		left = append(left, strings.TrimPrefix(subject, "$KV."+runstore.InputBucket+"."))
	}
	slices.Sort(left)
	if want := []string{"active.cancel", "earlier-release.cancel"}; !slices.Equal(left, want) {
		t.Errorf("inputs left %v; want %v", left, want)
	}
}

// TestAwaitEndsWhenItsWatchMissesTheDiscard: Discard purges a run's checkpoint through the
// bucket, which leaves a marker that an Await's watch delivers, then drops the marker from
// the bucket's stream. A watch whose consumer had not delivered the marker by then never
// does: the Await read the run once, before the purge, and waited out its caller's deadline
// (for good, without one), though the run was gone. Here the watch's consumer is paused over
// the Discard, so that it surely misses the marker; the Await still ends ErrNotFound.
func TestAwaitEndsWhenItsWatchMissesTheDiscard(t *testing.T) {
	s, js := open(t, time.Minute)
	runstore.SetAwaitRecheck(s, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	running(t, s, "discarded")
	read, awaited := make(chan struct{}), make(chan error, 1)
	var once sync.Once
	go func() {
		_, err := s.Await(ctx, "discarded", func(cp *checkpointv1.RunCheckpoint) bool {
			once.Do(func() { close(read) }) // read once: waiting
			return cp.GetPhase() == checkpointv1.Phase_PHASE_FINISHED
		})
		awaited <- err
	}()
	<-read
	stream, err := js.Stream(ctx, "KV_"+runstore.CheckpointBucket)
	if err != nil {
		t.Fatal(err)
	}
	var watches []string
	for name := range stream.ConsumerNames(ctx).Name() {
		watches = append(watches, name)
	}
	if len(watches) != 1 {
		t.Fatalf("consumers of the checkpoints %v; want the Await's watch alone", watches)
	}
	name := stream.CachedInfo().Config.Name
	if _, err := js.PauseConsumer(ctx, name, watches[0], time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(ctx, "discarded"); err != nil {
		t.Fatal(err)
	}
	// The wait may have seen the discard by its recheck already, and stopped its watch.
	_, err = js.ResumeConsumer(ctx, name, watches[0])
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatal(err)
	}
	if err := <-awaited; !errors.Is(err, runstore.ErrNotFound) {
		t.Fatalf("Await of a run discarded while its watch was paused = %v; want ErrNotFound", err)
	}
}

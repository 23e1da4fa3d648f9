package mesh_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestARetiredRunLeavesNoCheckpoint: once the memory stage has a finished run's result, its
// checkpoint leaves AGENTMESH_CHECKPOINTS (it used to stay there as a tombstone for good: a
// key for every run ever made) and its tombstone waits in AGENTMESH_FINISHED_RUNS, whose keys
// live as long as the run's events (seven days by default, longer than an idempotency key's
// day); GetRun still answers, from the memory stage, and a run with the same id is
// ALREADY_EXISTS, and is discarded.
func TestARetiredRunLeavesNoCheckpoint(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "hello", Match: "hello", Turns: []llmtest.Turn{text("Hello.")}})
	res := h.run(t, &agentv1.RunRequest{Message: "hello", RunId: "retired-run"})
	noCheckpoint := func() bool { return len(h.keys(t, runstore.CheckpointBucket)) == 0 }
	if !eventually(t, 10*time.Second, noCheckpoint) {
		t.Fatalf("%s still holds checkpoints of %v 10s after the run finished", runstore.CheckpointBucket, h.keys(t, runstore.CheckpointBucket))
	}
	finished := h.bucket(t, runstore.FinishedBucket)
	if _, err := finished.Get(t.Context(), "retired-run"); err != nil {
		t.Errorf("no tombstone of the run in %s: %v", runstore.FinishedBucket, err)
	}
	st, err := finished.Status(t.Context())
	if err != nil || st.TTL() != 7*24*time.Hour {
		t.Errorf("%s keeps its keys %v (%v), want 168h, as long as the events", runstore.FinishedBucket, st.TTL(), err)
	}

	got, err := h.client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: "retired-run"})
	if err != nil || got.GetOutcome() != res.GetOutcome() || got.GetFinalReport().GetContent() != res.GetFinalReport().GetContent() {
		t.Fatalf("GetRun of the retired run = %v %q, %v; want %v %q", got.GetOutcome(), got.GetFinalReport().GetContent(), err, res.GetOutcome(), res.GetFinalReport().GetContent())
	}
	_, err = h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hello", RunId: "retired-run"})
	wantCode(t, err, codes.AlreadyExists, "Run with the id of a retired run")
	if !noCheckpoint() {
		t.Errorf("the refused run's checkpoint stays in %s", runstore.CheckpointBucket)
	}
	if ids := h.keys(t, runstore.ActiveBucket); len(ids) != 0 {
		t.Errorf("the refused run stays among the active runs: %v", ids)
	}
}

// keys lists the keys the key-value bucket holds a value for, from its stream's state, in
// one request. Not the bucket's ListKeys: its watch waits for as many messages as the stream
// held when it began, and never ends when one of them is purged before it is delivered (a
// run retired meanwhile).
func (h *harness) keys(t *testing.T, bucket string) []string {
	t.Helper()
	st, err := h.jetStream(t).Stream(t.Context(), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "$KV." + bucket + "."
	info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for subject := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subject, prefix))
	}
	slices.Sort(keys)
	return keys
}

// TestTheKeeperFinishesWhatARetirementLeft: a keeper that adopts a run (its owner is gone)
// found in a state a retirement or a refused run left behind moves it on without running it:
// a run created with a retired run's id whose discarding failed (its caller heard
// ALREADY_EXISTS) is discarded; an earlier release's tombstone, in the checkpoints' bucket, moves
// to AGENTMESH_FINISHED_RUNS. Neither run resumes: neither has an event.
func TestTheKeeperFinishesWhatARetirementLeft(t *testing.T) {
	cfg := config.Default()
	cfg.Durability.LeaseTTLMS = 1000
	h := start(t, cfg, llmtest.Scenario{Name: "hello", Match: "hello", Turns: []llmtest.Turn{text("Hello.")}})
	ctx := t.Context()
	store, err := runstore.Open(ctx, h.mesh.NATS(), runstore.Config{
		Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: time.Second, IdempotencyTTL: 24 * time.Hour, FinishedTTL: 7 * 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	started := func(id string) *checkpointv1.RunCheckpoint {
		return &checkpointv1.RunCheckpoint{RunId: id, Phase: checkpointv1.Phase_PHASE_STARTED, Replica: "gone", UserId: "anonymous",
			Request: &agentv1.RunRequest{Message: "hello", RunId: id}}
	}
	tombstone := func(id string) *checkpointv1.RunCheckpoint {
		return &checkpointv1.RunCheckpoint{RunId: id, Phase: checkpointv1.Phase_PHASE_FINISHED, ResultSaved: true, Replica: "gone", UserId: "anonymous"}
	}
	if err := store.Finish(ctx, tombstone("refused"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, started("refused")); err != nil {
		t.Fatal(err)
	}
	head, err := store.Create(ctx, started("earlier-release"))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(ctx, tombstone("earlier-release"), head); err != nil {
		t.Fatal(err)
	}

	if !eventually(t, 20*time.Second, func() bool {
		return len(h.keys(t, runstore.CheckpointBucket)) == 0 && len(h.keys(t, runstore.ActiveBucket)) == 0
	}) {
		t.Fatalf("after 20s the store still holds checkpoints of %v and active runs %v", h.keys(t, runstore.CheckpointBucket), h.keys(t, runstore.ActiveBucket))
	}
	finished := h.bucket(t, runstore.FinishedBucket)
	for _, id := range []string{"refused", "earlier-release"} {
		if _, err := finished.Get(ctx, id); err != nil {
			t.Errorf("no tombstone of %s in %s: %v", id, runstore.FinishedBucket, err)
		}
	}
	stream, err := h.jetStream(t).Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"refused", "earlier-release"} {
		if msg, err := stream.GetLastMsgForSubject(ctx, events.Subject(id, ">")); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("run %s resumed: an event on %v (%v); want none", id, msg.Subject, err)
		}
	}
}

// TestAResultSavedLateIsFinishedOnce: a run finishes while the memory stage is down, so its
// result stays in its checkpoint and replicas take the run, again and again, to save it. Each
// looks whether run_finished is stored already before it publishes it. Once the run's
// total_timeout_ms has passed, the context that look was made in ended at once (the timer of a
// run taken over fires at once), the look failed, and every replica that took the run
// published run_finished again: one more for every pass of the keepers, for as long as the
// memory stage stayed down. The run's events keep one run_finished, the last.
func TestAResultSavedLateIsFinishedOnce(t *testing.T) {
	const total = 1500 * time.Millisecond
	h := replicaMesh(t, llmtest.Scenario{Name: "late", Match: "save me late", Turns: []llmtest.Turn{text("saved late")}})
	if err := h.mesh.Stop(t.Context(), mesh.Memory); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	res, err := h.replicas[0].Run(t.Context(), &agentv1.RunRequest{Message: "save me late", Overrides: &agentv1.RunOverrides{TotalTimeoutMs: proto.Int64(total.Milliseconds())}})
	if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
		t.Fatalf("Run = %v, %v", res.GetOutcome(), err)
	}
	const failedSave = "saving run result failed; it stays in the checkpoint store"
	saves := func() int { return strings.Count(h.logs.String(), failedSave) }
	// Wait for the replicas to try saving the result three more times after total_timeout_ms.
	var after int
	if !eventually(t, 30*time.Second, func() bool {
		if time.Since(started) < total {
			after = saves()
			return false
		}
		return saves() >= after+3
	}) {
		t.Fatalf("the replicas tried to save the result %d times in all", saves())
	}
	_, msgs := h.storedEvents(t, res.GetRunId())
	var kinds []string
	for _, msg := range msgs {
		kinds = append(kinds, msg.Subject()[strings.LastIndex(msg.Subject(), ".")+1:])
	}
	if n := count(kinds, "run_finished"); n != 1 || kinds[len(kinds)-1] != "run_finished" {
		t.Errorf("the run's events hold %d run_finished: %v; want one, the last", n, kinds)
	}
}

// TestTheKeeperSweepsInputsOfRetiredRuns: an input left for a run that has retired (its
// writer, a replica answering CancelRun, stopped after writing it and before finding the run
// gone) is purged by a keeper. AGENTMESH_RUN_INPUTS has no TTL: it stayed there for good, and
// every replica's watch of the bucket replayed it at every start.
func TestTheKeeperSweepsInputsOfRetiredRuns(t *testing.T) {
	cfg := config.Default()
	cfg.Durability.LeaseTTLMS = 1000 // the keeper looks every third of a second
	h := start(t, cfg, llmtest.Scenario{Name: "hello", Match: "hello", Turns: []llmtest.Turn{text("Hello.")}})
	res := h.run(t, &agentv1.RunRequest{Message: "hello"})
	if !eventually(t, 10*time.Second, func() bool { return len(h.keys(t, runstore.CheckpointBucket)) == 0 }) {
		t.Fatal("the run did not retire")
	}
	cancel, err := proto.Marshal(&agentv1.CancelRunRequest{RunId: res.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.bucket(t, runstore.InputBucket).Put(t.Context(), res.GetRunId()+".cancel", cancel); err != nil {
		t.Fatal(err)
	}
	if !eventually(t, 15*time.Second, func() bool { return len(h.keys(t, runstore.InputBucket)) == 0 }) {
		t.Fatalf("%s still holds %v 15s after the run retired", runstore.InputBucket, h.keys(t, runstore.InputBucket))
	}
}

package main

import (
	"errors"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestResultSavedAfterMemoryOutage proves that a run's final result is durable while the memory
// stage is down at TERMINATE (issue 10, item 6), and reaches the memory stage once it is back.
//
// With the memory stage killed, a run (one tool call, then an answer) completes on replica a;
// replica b's GetRun returns the whole result from the checkpoint store (same outcome, same
// transcript), and the run stays in the active index (AGENTMESH_RUN_OWNERS) because its result
// is not saved yet. The memory stage is then started again, empty (its store is in-process
// memory), and the replicas' keepers, which adopt such runs and retry saving them, must bring
// the result into it: the memory stage's own GetRun returns the run, the run leaves the active
// index, its checkpoint gives way to a tombstone (result_saved, without the result, in
// AGENTMESH_FINISHED_RUNS), GetRun on b
// still answers (now from the memory stage), the stream holds exactly one run_finished, and
// the tool ran once.
//
// While the memory stage is down, GetRun on either replica must return the result at any time,
// also on the replica whose keeper adopted the run to retry the save: the test reads the run on
// both replicas across several adoptions.
//
// The run's facts are not lost either (issue 13.5): the memory stage learns from the result
// saved late what the user asked it to remember.
func TestResultSavedAfterMemoryOutage(t *testing.T) {
	const message = "memory outage: count once. Remember that my locker is number 12."
	llm := llmtest.New(t, llmtest.Scenario{Name: "memory outage", Match: message, Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolBump, "memory-outage")}},
		{Content: "Counted once, with the memory stage down."},
	}})
	tools := meshproc.NewToolServer(t)
	m := durableMesh(t, llm, tools)
	a, b := m.Replica(t, "a"), m.Replica(t, "b")
	memory := m.Stage(t, "memory")
	active, err := m.JetStream().KeyValue(t.Context(), runstore.ActiveBucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", runstore.ActiveBucket, err)
	}
	checkpoints, err := m.JetStream().KeyValue(t.Context(), runstore.CheckpointBucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", runstore.CheckpointBucket, err)
	}
	finished, err := m.JetStream().KeyValue(t.Context(), runstore.FinishedBucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", runstore.FinishedBucket, err)
	}

	memory.Kill(t)

	const runID = "memory-outage"
	req := &agentv1.RunRequest{RunId: runID, Message: message}
	done, err := a.Agent().Run(t.Context(), req)
	if err != nil {
		t.Fatalf("Run on a with the memory stage down: %v", err)
	}
	if done.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("Run on a ended %s %s (error %v), want COMPLETED_WITH_TOOLS", done.GetOutcome(), done.GetExitReason(), done.GetError())
	}
	got, err := b.Agent().GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
	if err != nil {
		t.Fatalf("GetRun on b with the memory stage down: %v", err)
	}
	sameResult(t, "GetRun on b with the memory stage down", got, done)
	checkTranscript(t, b, got)
	if _, err := active.Get(t.Context(), runID); err != nil {
		t.Errorf("with the memory stage down, the run is not in %s: %v; it must stay there until its result is saved", runstore.ActiveBucket, err)
	}

	readWhileRetried(t, active, runID, done, a, b)

	memory.Restart(t)

	conn, err := grpc.NewClient(memory.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	stage := memoryv1.NewMemoryServiceClient(conn)
	var saved *typev1.RunResult
	var last error
	if !poll(t, runTimeout, func() bool {
		resp, err := stage.GetRun(t.Context(), &memoryv1.GetRunRequest{RunId: runID})
		switch status.Code(err) {
		case codes.OK:
			saved = resp.GetResult()
			return true
		case codes.NotFound, codes.Unavailable:
			last = err
			return false
		}
		t.Fatalf("GetRun(%s) on the memory stage: %v", runID, err)
		return false
	}) {
		t.Fatalf("the memory stage did not get run %s within %s of its restart: last GetRun: %v", runID, runTimeout, last)
	}
	sameResult(t, "the memory stage's GetRun", saved, done)

	if !poll(t, runTimeout, func() bool {
		_, err := active.Get(t.Context(), runID)
		last = err
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}) {
		t.Errorf("run %s is still in %s %s after its result was saved: last Get: %v", runID, runstore.ActiveBucket, runTimeout, last)
	}
	// Retired, the run's checkpoint log is gone.
	log, err := m.JetStream().Stream(t.Context(), runstore.LogStream)
	if err != nil {
		t.Fatalf("stream %s: %v", runstore.LogStream, err)
	}
	for _, subject := range []string{runstore.SegmentSubject(runID), runstore.BodySubject(runID)} {
		if _, err := log.GetLastMsgForSubject(t.Context(), subject); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("the checkpoint log still holds %s after the run was retired (last message: %v)", subject, err)
		}
	}
	// Retired, its checkpoint is gone, and its tombstone keeps its id taken.
	if _, err := checkpoints.Get(t.Context(), runID); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the checkpoint of run %s is still in %s after the run was retired: %v", runID, runstore.CheckpointBucket, err)
	}
	entry, err := finished.Get(t.Context(), runID)
	if err != nil {
		t.Fatalf("tombstone of run %s: %v", runID, err)
	}
	tomb := &checkpointv1.RunCheckpoint{}
	if err := proto.Unmarshal(entry.Value(), tomb); err != nil {
		t.Fatalf("tombstone of run %s: %v", runID, err)
	}
	if tomb.GetPhase() != checkpointv1.Phase_PHASE_FINISHED || !tomb.GetResultSaved() || tomb.GetResult() != nil {
		t.Errorf("tombstone of run %s is %s result_saved=%t with a result: %t; want FINISHED, result_saved, without the result",
			runID, tomb.GetPhase(), tomb.GetResultSaved(), tomb.GetResult() != nil)
	}

	// With the run retired, b reads the result from the memory stage. b's own
	// connection to the restarted stage may still be waiting out gRPC's reconnect backoff (it
	// was refused during the outage), so b is polled until it reaches the stage.
	var after *typev1.RunResult
	if !poll(t, runTimeout, func() bool {
		after, last = b.Agent().GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
		return last == nil
	}) {
		t.Fatalf("GetRun on b once the result is saved: %v", last)
	}
	sameResult(t, "GetRun on b once the result is saved", after, done)
	checkEventLog(t, m, runID)
	if n := tools.Count("memory-outage"); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	const fact = "The user's locker is number 12."
	if !poll(t, runTimeout, func() bool {
		resp, err := stage.List(t.Context(), &memoryv1.ListRequest{UserId: "anonymous"}) // the user of a run without one, auth off
		last = err
		return err == nil && len(resp.GetMemories()) == 1 && resp.GetMemories()[0].GetContent() == fact
	}) {
		t.Errorf("the memory stage did not learn %q from the run saved late within %s: last List: %v", fact, runTimeout, last)
	}
}

// retriedAdoptions is how many times readWhileRetried sees a keeper adopt the run to retry
// saving its result.
const retriedAdoptions = 3

// readWhileRetried reads the finished run on every replica, every few milliseconds, until the
// replicas' keepers have adopted it retriedAdoptions times to retry saving its result (each
// adoption notes the adopter in the active index): each read must return the whole result, the
// same as done, whichever replica is retrying the save at that moment.
func readWhileRetried(t *testing.T, active jetstream.KeyValue, runID string, done *typev1.RunResult, replicas ...*meshproc.Service) {
	t.Helper()
	w, err := active.Watch(t.Context(), runID, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatalf("watch %s: %v", runstore.ActiveBucket, err)
	}
	defer func() { _ = w.Stop() }()
	var adopters []string
	ok := poll(t, runTimeout, func() bool {
		for _, r := range replicas {
			res, err := r.Agent().GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
			if err != nil {
				t.Fatalf("GetRun on %s with the memory stage down, after adoptions by %v: %v", r.Name(), adopters, err)
			}
			sameResult(t, "GetRun on "+r.Name()+" with the memory stage down", res, done)
		}
		for {
			select {
			case e := <-w.Updates():
				if e != nil && e.Operation() == jetstream.KeyValuePut {
					adopters = append(adopters, string(e.Value()))
				}
				continue
			default:
			}
			return len(adopters) >= retriedAdoptions
		}
	})
	if !ok {
		t.Fatalf("the keepers adopted run %s %d times in %s (by %v), want %d retries of its save", runID, len(adopters), runTimeout, adopters, retriedAdoptions)
	}
}

// sameResult asserts that got is the whole finished run want: sameRun, and a transcript and a
// conversation as long as want's.
func sameResult(t *testing.T, what string, got, want *typev1.RunResult) {
	t.Helper()
	sameRun(t, what, got, want)
	if len(got.GetTranscript()) != len(want.GetTranscript()) || len(got.GetConversation()) != len(want.GetConversation()) {
		t.Errorf("%s has %d transcript entries and %d messages, want %d and %d", what,
			len(got.GetTranscript()), len(got.GetConversation()), len(want.GetTranscript()), len(want.GetConversation()))
	}
}

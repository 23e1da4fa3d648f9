package mesh_test

import (
	"context"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestAnUnreadableCheckpointEndsTheRunOnce: a paused run whose stored checkpoint cannot be read
// back (its entry does not decode, or its log does not hold what it counts) is ended once by
// the replica that adopts it when its owner drains, FAILED_VALIDATION / CHECKPOINT_UNREADABLE
// with an error naming the cause, where every keeper took it over, failed to resume it and
// handed it off again, for ever, while its callers waited. WatchRun through the other replica
// sees one run_finished, and the run is retired; GetRun answers the failed result, but for a
// run whose user is unknown (its entry does not decode), which the memory stage cannot keep.
func TestAnUnreadableCheckpointEndsTheRunOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(data []byte) []byte
		cause   string
		kept    bool // GetRun answers the result
	}{
		{"entry", func([]byte) []byte { return []byte("\xff\xff not a checkpoint") },
			"is corrupt", false},
		{"log", func(data []byte) []byte {
			cp := &checkpointv1.RunCheckpoint{}
			if err := proto.Unmarshal(data, cp); err != nil || cp.GetLog() == nil {
				t.Fatalf("checkpoint %v: %v", cp, err)
			}
			cp.Log.Messages++
			out, err := proto.Marshal(cp)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}, "the checkpoint counted", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := replicaMesh(t, llmtest.Scenario{Name: "approve", Match: "approve it",
				Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
			a, b := h.replicas[0], h.replicas[1]
			ctx := t.Context()
			res, err := a.Run(ctx, &agentv1.RunRequest{Message: "approve it", UserId: "ann"})
			if err != nil {
				t.Fatal(err)
			}
			paused(t, res, "c1")
			runID := res.GetRunId()
			checkpoints := h.bucket(t, runstore.CheckpointBucket)
			e, err := checkpoints.Get(ctx, runID)
			if err != nil {
				t.Fatal(err)
			}
			corrupt := tc.corrupt(e.Value())
			if _, err := checkpoints.Update(ctx, runID, corrupt, e.Revision()); err != nil {
				t.Fatal(err)
			}

			h.mesh.StopOrchestrator(context.WithoutCancel(ctx), 0)

			// A caller waits on the run through the other replica, with a deadline of its own.
			waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			watch, err := b.WatchRun(waitCtx, &agentv1.WatchRunRequest{RunId: runID})
			if err != nil {
				t.Fatal(err)
			}
			var final *typev1.RunResult
			for final == nil {
				ev, err := watch.Recv()
				if err != nil {
					t.Fatalf("watching the run: %v (before run_finished)", err)
				}
				final = ev.GetRunFinished().GetResult()
			}
			if final.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_VALIDATION ||
				final.GetExitReason() != orchestrator.ExitCheckpointUnreadable ||
				final.GetSuccess() || !strings.Contains(final.GetError().GetMessage(), tc.cause) {
				t.Fatalf("result %s %s %v",
					final.GetOutcome(), final.GetExitReason(), final.GetError())
			}
			if !eventually(t, 10*time.Second, func() bool {
				_, err := h.bucket(t, runstore.ActiveBucket).Get(ctx, runID)
				return err != nil
			}) {
				t.Fatal("the run was not retired")
			}
			got, err := b.GetRun(ctx, &agentv1.GetRunRequest{RunId: runID})
			switch {
			case !tc.kept:
				wantCode(t, err, codes.NotFound, "GetRun of a run whose user is unknown")
			case err != nil || got.GetExitReason() != orchestrator.ExitCheckpointUnreadable:
				t.Fatalf("GetRun = %v, %v", got, err)
			}
			stream, err := h.jetStream(t).Stream(ctx, events.StreamName)
			if err != nil {
				t.Fatal(err)
			}
			subject := events.Subject(runID, "run_finished")
			info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
			if err != nil || info.State.Subjects[subject] != 1 {
				t.Fatalf("run_finished published %v times: %v", info.State.Subjects, err)
			}
		})
	}
}

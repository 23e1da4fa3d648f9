package mesh_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// TestAnUnreadableCheckpointEndsTheRunOnce: a paused run whose stored checkpoint cannot be read
// back (its entry does not decode, or its log does not hold what it counts) is ended once by
// the replica that adopts it when its owner drains, FAILED_VALIDATION / CHECKPOINT_UNREADABLE
// with an error naming the cause, where every keeper took it over, failed to resume it and
// handed it off again, for ever, while its callers waited. WatchRun through the other replica
// sees one run_finished, and the run is retired; GetRun answers the failed result, also of a
// run whose user is unknown (its entry does not decode), which the memory stage cannot keep:
// its tombstone keeps it, where GetRun was NOT_FOUND once the run retired.
func TestAnUnreadableCheckpointEndsTheRunOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(data []byte) []byte
		cause   string
	}{
		{"entry", func([]byte) []byte { return []byte("\xff\xff not a checkpoint") },
			"is corrupt"},
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
		}, "the checkpoint counted"},
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
			if err != nil || got.GetExitReason() != orchestrator.ExitCheckpointUnreadable {
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

// TestAMissingCheckpointLogEndsTheRun: a paused run whose checkpoint names a log segment, or
// an object holding one, that the store no longer has (the checkpoint still the run's) ends
// CHECKPOINT_UNREADABLE once too, when its owner drains. A missing segment was handed off for
// ever; a missing object read as a run the store does not hold, and the keeper retired the
// run without a result, a run_finished or a word, its callers waiting on.
func TestAMissingCheckpointLogEndsTheRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		req    *agentv1.RunRequest
		window int64 // the model's context window; 0: the default
		lose   func(t *testing.T, h *harness, runID string)
	}{
		{"segment", &agentv1.RunRequest{Message: "approve it " + strings.Repeat("x", 40<<10)}, 0,
			func(t *testing.T, h *harness, runID string) {
				log, err := h.jetStream(t).Stream(t.Context(), runstore.LogStream)
				if err != nil {
					t.Fatal(err)
				}
				msg, err := log.GetLastMsgForSubject(t.Context(), runstore.SegmentSubject(runID))
				if err != nil {
					t.Fatal(err)
				}
				if err := log.DeleteMsg(t.Context(), msg.Sequence); err != nil {
					t.Fatal(err)
				}
			}},
		{"object", &agentv1.RunRequest{Message: "approve it", History: bigHistory()}, 1 << 24,
			func(t *testing.T, h *harness, runID string) {
				bodies, err := h.jetStream(t).ObjectStore(t.Context(), runstore.BodyBucket)
				if err != nil {
					t.Fatal(err)
				}
				objects, err := bodies.List(t.Context())
				if err != nil || len(objects) == 0 {
					t.Fatalf("objects %v: %v", objects, err)
				}
				for _, o := range objects {
					if err := bodies.Delete(t.Context(), o.Name); err != nil {
						t.Fatal(err)
					}
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Tools.RequireApproval = []string{"calculator"}
			cfg.Durability.LeaseTTLMS = time.Second.Milliseconds()
			h := startReplicas(t, cfg, 2, func(cfg *config.Config, _ string) {
				if tc.window != 0 {
					p := cfg.Providers["scripted"]
					p.Models = map[string]config.Model{"gpt-test": {ContextWindow: tc.window,
						ContextWindowBufferTokens: 100, MaxOutputTokens: 500}}
					cfg.Providers["scripted"] = p
				}
			}, llmtest.Scenario{Name: "approve", Match: "approve it*",
				Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
			a, b := h.replicas[0], h.replicas[1]
			ctx := t.Context()
			res, err := a.Run(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			paused(t, res, "c1")
			tc.lose(t, h, res.GetRunId())
			h.mesh.StopOrchestrator(context.WithoutCancel(ctx), 0)

			waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			watch, err := b.WatchRun(waitCtx, &agentv1.WatchRunRequest{RunId: res.GetRunId()})
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
			if final.GetExitReason() != orchestrator.ExitCheckpointUnreadable {
				t.Fatalf("result %s %s %v",
					final.GetOutcome(), final.GetExitReason(), final.GetError())
			}
		})
	}
}

// bigHistory is a conversation history whose checkpoint log segment is too large for one NATS
// message, so that it goes to the object store.
func bigHistory() []*typev1.Message {
	var history []*typev1.Message
	for i := range 40 {
		history = append(history, &typev1.Message{Role: typev1.Role_ROLE_USER,
			Content: fmt.Sprintf("approve it %d %s", i, strings.Repeat("y", 40<<10))})
	}
	return history
}

package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
)

// TestARunOfAnEarlierReleaseMovesOver: a release before replica heartbeats indexed its runs in
// AGENTMESH_ACTIVE_RUNS, each with a lease in AGENTMESH_LEASES that its replica renewed. A run
// it left paused for approval when its replica died (killed with SIGKILL; its lease expired)
// is taken over by a replica of this release, which moves it to its own index: the run resumes
// for the reason "lease expired", is approved there, runs its tool once and finishes, and the
// earlier release's buckets hold nothing of it.
func TestARunOfAnEarlierReleaseMovesOver(t *testing.T) {
	const runID = "earlier-release"
	llm := llmtest.New(t, llmtest.Scenario{Name: "earlier", Match: "left by an earlier release", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolGuardedBump, runID)}},
		{Content: "Moved over."},
	}})
	tools := meshproc.NewToolServer(t)
	m := durableMesh(t, llm, tools)
	a := m.Replica(t, "a")
	ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
	defer cancel()

	res, err := a.Agent().Run(ctx, &agentv1.RunRequest{RunId: runID, Message: "left by an earlier release"})
	if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
		t.Fatalf("Run on a = %s, %v; want AWAITING_APPROVAL", res.GetOutcome(), err)
	}
	a.Kill(t)

	// Index the run as the earlier release did; its lease expired with its replica.
	js := m.JetStream()
	legacy, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: runstore.LegacyActiveBucket, History: 1})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: runstore.LegacyLeaseBucket, History: 1, TTL: meshproc.LeaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := legacy.Put(ctx, runID, []byte("a")); err != nil {
		t.Fatal(err)
	}
	index, err := js.Stream(ctx, "KV_"+runstore.ActiveBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Purge(ctx, jetstream.WithPurgeSubject("$KV."+runstore.ActiveBucket+"."+runID)); err != nil {
		t.Fatal(err)
	}

	b := m.Replica(t, "b")
	if got := m.WaitEvent(t, runID, "run_resumed", takeoverTimeout).GetRunResumed(); got.GetReplica() != "b" {
		t.Fatalf("run_resumed = %v, want the run taken over by b", got)
	}
	if _, err := b.Agent().ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{
		RunId: runID, CallId: "call-1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE,
	}); err != nil {
		t.Fatalf("ResolveApproval on b: %v", err)
	}
	done := checkSurvived(t, m, b, runID, leaseExpired, typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS)
	if n := tools.Count(runID); n != 1 {
		t.Errorf("the approved tool ran %d times, want 1", n)
	}
	checkToolSaw(t, done, "call-1", meshproc.Answer(runID, 1))
	for _, kv := range []jetstream.KeyValue{legacy, leases} {
		if _, err := kv.Get(ctx, runID); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("the earlier release's %s still holds the run: %v", kv.Bucket(), err)
		}
	}
	owners, err := js.KeyValue(ctx, runstore.ActiveBucket)
	if err != nil {
		t.Fatal(err)
	}
	if !poll(t, 10*time.Second, func() bool {
		_, err := owners.Get(ctx, runID)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	}) {
		t.Error("the finished run stays in this release's index of active runs")
	}
}

package mesh_test

import (
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
)

// TestALapsedReplicaDropsARunFinishedElsewhere: while a replica stalled past the TTL, another
// replica took one of its runs over, finished it and retired it, so the run has no owner any
// more, only its tombstone. At its next beat the stalled replica finds its heartbeat lapsed
// and must stop that run too, as it stops the runs another replica owns. It kept it: the
// owner lookup found no owner and took that for the run still being its own, so the run
// waited on for its approval there, and GetRun on that replica answered the run paused.
func TestALapsedReplicaDropsARunFinishedElsewhere(t *testing.T) {
	h := replicaMeshTTL(t, 3*time.Second,
		llmtest.Scenario{Name: "elsewhere", Match: "elsewhere",
			Turns: []llmtest.Turn{calcTurn("c1", "2+2"), text("4")}})
	const runID = "finished-elsewhere"
	res, err := h.replicas[0].Run(t.Context(), &agentv1.RunRequest{Message: "elsewhere", RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")

	// orchestrator-2 took the run over, finished it and retired it, as runstore.Finish does.
	ctx := t.Context()
	other, err := runstore.Open(ctx, h.mesh.NATS(), runstore.Config{
		Replicas: 1, Storage: jetstream.FileStorage, LeaseTTL: 3 * time.Second, IdempotencyTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	tomb := &checkpointv1.RunCheckpoint{RunId: runID, Phase: checkpointv1.Phase_PHASE_FINISHED,
		ResultSaved: true, Replica: "orchestrator-2"}
	if err := other.Finish(ctx, tomb, nil); err != nil {
		t.Fatal(err)
	}
	h.purgeHeartbeat(t, "orchestrator-1")

	stale := func() bool {
		got, err := h.replicas[0].GetRun(ctx, &agentv1.GetRunRequest{RunId: runID})
		return err == nil && got.GetOutcome() == typev1.Outcome_OUTCOME_AWAITING_APPROVAL
	}
	if !eventually(t, 10*time.Second, func() bool { return !stale() }) {
		t.Fatal("orchestrator-1 still answers the run paused, 10s after its heartbeat lapsed; " +
			"another replica finished and retired it")
	}
	if !eventually(t, 10*time.Second, h.logged(`"replica":"orchestrator-1"`, "it stops here", runID)) {
		t.Fatal("orchestrator-1 did not log that it stopped the run")
	}
}

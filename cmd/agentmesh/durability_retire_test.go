package main

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStoppedReplicaRetiresItsFinishedRuns: a replica answers Run before it retires the run's
// records in the store (its tombstone checkpoint, the purge of its entry among the active runs,
// its lease's release: issue 15), so a replica stopped with SIGTERM just after its runs answered
// must retire them before it exits. Eight runs answer, the replica is stopped at once; it exits
// cleanly, and no run is left among the active runs.
func TestStoppedReplicaRetiresItsFinishedRuns(t *testing.T) {
	const runs = 8
	llm := llmtest.New(t, llmtest.Scenario{Name: "retire", Match: "retire *", Turns: []llmtest.Turn{{Content: "Done."}}})
	m := durableMesh(t, llm, meshproc.NewToolServer(t))
	a := m.Replica(t, "a")

	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			req := &agentv1.RunRequest{RunId: fmt.Sprintf("retire-%d", i), Message: fmt.Sprintf("retire %d", i)}
			res, err := a.Agent().Run(t.Context(), req)
			if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
				t.Errorf("run %s: %v %v", req.GetRunId(), res.GetOutcome(), err)
			}
		})
	}
	wg.Wait()
	if err := a.Stop(t); err != nil {
		t.Fatalf("replica a did not exit cleanly on SIGTERM: %v", err)
	}

	kv, err := m.JetStream().KeyValue(t.Context(), runstore.ActiveBucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", runstore.ActiveBucket, err)
	}
	for i := range runs {
		id := fmt.Sprintf("retire-%d", i)
		if _, err := kv.Get(t.Context(), id); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("run %s is still in %s after its replica exited (Get: %v): its records were not retired", id, runstore.ActiveBucket, err)
		}
	}
}

package meshproc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestMesh exercises the harness on the mesh as it is, without relying on durable runs: a run
// through the configured LLM and REST tool, read back from JetStream; a replica killed, refused
// and restarted on its address, and stopped cleanly with SIGTERM; a client retrying UNAVAILABLE
// on the other replica; NATS killed and restarted on its port with its store; call records read
// from their bucket.
func TestMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	llm := llmtest.New(t, llmtest.Scenario{Match: "count *", Turns: []llmtest.Turn{
		{Respond: func(req llmtest.Request, _ int) llmtest.Turn {
			key := string(req.Messages[len(req.Messages)-1].Content)[len("count "):]
			return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "bump", Arguments: `{"key":"` + key + `"}`}}}
		}},
		{Content: "Counted."},
	}})
	tools := meshproc.NewToolServer(t)
	m := meshproc.Start(t, meshproc.Options{Config: meshproc.Config{
		LLM:       llm.URL(),
		RestTools: map[string]config.RestTool{"bump": tools.Tool("Counts.")},
	}})
	a, b := m.Replica(t, "a"), m.Replica(t, "b")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	res, err := a.Agent().Run(ctx, &agentv1.RunRequest{Message: "count one", RunId: "mesh-one"})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || tools.Count("one") != 1 {
		t.Fatalf("run ended %s %v with %d tool executions", res.GetOutcome(), res.GetError(), tools.Count("one"))
	}
	evs := m.StoredEvents(t, "mesh-one")
	if len(evs) < 3 || evs[0].GetRunStarted() == nil || evs[len(evs)-1].GetRunFinished() == nil {
		t.Errorf("stored events %v", evs)
	}
	if n := m.CountEvents(t, "mesh-one", "run_finished"); n != 1 {
		t.Errorf("%d run_finished stored", n)
	}
	if ev := m.WaitEvent(t, "mesh-one", "tool_finished", time.Second); ev.GetToolFinished().GetToolName() != "bump" {
		t.Errorf("tool_finished = %v", ev)
	}

	a.Kill(t)
	if a.Running() {
		t.Error("a runs after Kill")
	}
	if _, err := a.Agent().ListTools(ctx, &agentv1.ListToolsRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("ListTools on a killed replica: %v, want UNAVAILABLE", err)
	}
	res, attempts, err := m.Client().Run(ctx, 0, &agentv1.RunRequest{Message: "count two", IdempotencyKey: "two"})
	if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("client Run with a down: %v %v", res.GetOutcome(), err)
	}
	if len(attempts) == 0 || attempts[0].Replica != "a" || status.Code(attempts[0].Err) != codes.Unavailable {
		t.Errorf("failed attempts %v, want a first, UNAVAILABLE", attempts)
	}
	a.Restart(t)
	if _, err := a.Agent().ListTools(ctx, &agentv1.ListToolsRequest{}); err != nil {
		t.Errorf("ListTools on the restarted replica: %v", err)
	}
	if err := b.Stop(t); err != nil {
		t.Errorf("b did not exit cleanly on SIGTERM: %v", err)
	}
	b.Restart(t)

	m.NATS().Kill(t)
	m.NATS().Restart(t)
	if _, err := m.JetStream().Stream(ctx, events.StreamName); err != nil {
		t.Errorf("the stream after a NATS restart with its store: %v", err)
	}
	if got, err := m.Stage(t, "memory").Health(ctx); err != nil || got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("memory health %s, %v", got, err)
	}
	if _, _, err := m.Client().Run(ctx, 0, &agentv1.RunRequest{}); err == nil {
		t.Error("a retried Run without idempotency key was accepted")
	}

	// WaitCallRecord reads the action stage's records by value, whatever their keys.
	go func() {
		kv, err := m.JetStream().KeyValue(ctx, meshproc.ToolCallsBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = m.JetStream().CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: meshproc.ToolCallsBucket})
		}
		if err != nil {
			t.Error(err)
			return
		}
		for _, state := range []actionv1.CallState{actionv1.CallState_CALL_STATE_STARTED, actionv1.CallState_CALL_STATE_DONE} {
			rec, _ := proto.Marshal(&actionv1.CallRecord{RunId: "meshproc-fake", CallId: "c1", ToolName: "bump", State: state})
			if _, err := kv.Put(ctx, "some.key", rec); err != nil {
				t.Error(err)
			}
		}
	}()
	if rec := m.WaitCallRecord(t, "meshproc-fake", "c1", actionv1.CallState_CALL_STATE_DONE, time.Minute); rec.GetToolName() != "bump" {
		t.Errorf("call record %v", rec)
	}
}

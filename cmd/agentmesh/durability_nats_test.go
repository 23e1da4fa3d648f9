package main

import (
	"context"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestNATSRestart proves that a NATS outage wedges neither a run, nor its clients, nor a replica
// (issue 10, item 6).
func TestNATSRestart(t *testing.T) {
	release := make(chan struct{})
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "outage", Match: "nats: outage", Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolBump, "nats-outage")}},
			{Content: "Finished across the outage.", Hold: release},
		}},
		llmtest.Scenario{Name: "empty store", Match: "nats: empty store *", Turns: []llmtest.Turn{
			{Respond: func(req llmtest.Request, _ int) llmtest.Turn {
				key := "empty-store-" + firstUserMessage(req)[len("nats: empty store "):]
				return llmtest.Turn{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolBump, key)}}
			}},
			{Content: "Finished on a fresh store."},
		}},
	)
	tools := meshproc.NewToolServer(t)
	m := durableMesh(t, llm, tools)
	a, b := m.Replica(t, "a"), m.Replica(t, "b")

	// NATS is killed while a run waits for the model: the replicas report NOT_SERVING while
	// events cannot be stored and SERVING once NATS is back with its store; the run finishes
	// exactly once, and its StreamRun client (on a) and WatchRun client (on b) each get
	// run_finished or an error before their deadline, never silence.
	t.Run("killed mid-run, restarted with its store", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
		defer cancel()
		req := &agentv1.RunRequest{RunId: "nats-outage", Message: "nats: outage"}
		streamed, err := a.Agent().StreamRun(ctx, req)
		if err != nil {
			t.Fatalf("StreamRun on a: %v", err)
		}
		streamEnded := follow(streamed)
		m.WaitEvent(t, req.GetRunId(), "tool_finished", runTimeout)
		watched, err := b.Agent().WatchRun(ctx, &agentv1.WatchRunRequest{RunId: req.GetRunId()})
		if err != nil {
			t.Fatalf("WatchRun on b: %v", err)
		}
		watchEnded := follow(watched)

		m.NATS().Kill(t)
		checkHealth(t, healthpb.HealthCheckResponse_NOT_SERVING, a, b)
		m.NATS().Restart(t)
		checkHealth(t, healthpb.HealthCheckResponse_SERVING, a, b)
		close(release)

		m.WaitEvent(t, req.GetRunId(), "run_finished", runTimeout)
		res := finishedRun(t, b, req.GetRunId())
		if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
			t.Errorf("run ended %s %v", res.GetOutcome(), res.GetError())
		}
		checkEventLog(t, m, req.GetRunId())
		checkTranscript(t, b, res)
		if n := tools.Count("nats-outage"); n != 1 {
			t.Errorf("the tool ran %d times, want 1", n)
		}
		for name, end := range map[string]*streamEnd{"StreamRun on a": streamEnded, "WatchRun on b": watchEnded} {
			await(t, end.done, 2*runTimeout, name+" to end")
			if status.Code(end.err) == codes.DeadlineExceeded {
				t.Errorf("%s: silence until the deadline after %d events", name, len(end.events))
				continue
			}
			if end.err == nil && end.last().GetRunFinished().GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
				t.Errorf("%s ended without an error and with %v, want run_finished COMPLETED_WITH_TOOLS", name, end.last())
			}
		}
	})

	// NATS comes back with an empty store: the stream AGENTMESH_RUNS and the key-value buckets
	// are gone. The replicas report SERVING again, and new runs on either replica work, their
	// events stored in a recreated stream and their tool calls recorded again.
	t.Run("restarted with an empty store", func(t *testing.T) {
		if !m.NATS().Running() { // the case before failed while NATS was down
			m.NATS().Restart(t)
		}
		m.NATS().Kill(t)
		checkHealth(t, healthpb.HealthCheckResponse_NOT_SERVING, a, b)
		m.NATS().RestartEmpty(t)
		checkHealth(t, healthpb.HealthCheckResponse_SERVING, a, b)

		ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
		defer cancel()
		for _, r := range []*meshproc.Service{a, b} {
			req := &agentv1.RunRequest{RunId: "nats-empty-store-" + r.Name(), Message: "nats: empty store " + r.Name()}
			res, err := r.Agent().Run(ctx, req)
			if err != nil {
				t.Errorf("Run on %s: %v", r.Name(), err)
				continue
			}
			if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
				t.Errorf("run on %s ended %s %v", r.Name(), res.GetOutcome(), res.GetError())
			}
			checkEventLog(t, m, req.GetRunId())
			if n := tools.Count("empty-store-" + r.Name()); n != 1 {
				t.Errorf("the tool of the run on %s ran %d times, want 1", r.Name(), n)
			}
		}
	})
}

// checkHealth waits until each replica reports want, all at once, each in a subtest of its own
// so that a replica that does not fails the test without ending it.
func checkHealth(t *testing.T, want healthpb.HealthCheckResponse_ServingStatus, replicas ...*meshproc.Service) {
	t.Helper()
	var wg sync.WaitGroup
	for _, r := range replicas {
		wg.Go(func() {
			t.Run(r.Name()+" reports "+want.String(), func(t *testing.T) { r.WaitHealth(t, want) })
		})
	}
	wg.Wait()
}

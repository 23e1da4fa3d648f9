package mesh_test

import (
	"context"
	"sync"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRPCsWhileNATSIsDownAreUnavailable: with NATS down, the RPCs that read or write the run
// store answer UNAVAILABLE (retry later) on every replica, once a store request has gone
// unanswered, well before their callers' deadlines. Before, a store request that went
// unanswered for its own time limit reached the caller as DEADLINE_EXCEEDED, as if the
// caller's own deadline had passed, and WatchRun of an unknown run waited until the caller's
// deadline.
func TestRPCsWhileNATSIsDownAreUnavailable(t *testing.T) {
	dir := t.TempDir()
	nats, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nats.Shutdown() }) // after the mesh's cleanup
	cfg := config.Default()
	cfg.NATS.URL = nats.ClientURL()
	cfg.Tools.RequireApproval = []string{"calculator"}
	h := startReplicas(t, cfg, 2, nil, llmtest.Scenario{Name: "approve", Match: "approve it", Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	res, err := h.replicas[0].Run(t.Context(), &agentv1.RunRequest{Message: "approve it"})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")
	port := nats.Port()
	nats.Shutdown()

	const deadline = 20 * time.Second
	calls := map[string]func(ctx context.Context, c agentv1.AgentServiceClient) error{
		"GetRun of an unknown run": func(ctx context.Context, c agentv1.AgentServiceClient) error {
			_, err := c.GetRun(ctx, &agentv1.GetRunRequest{RunId: "unknown"})
			return err
		},
		"ResolveApproval": func(ctx context.Context, c agentv1.AgentServiceClient) error {
			_, err := c.ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
			return err
		},
		"Answer": func(ctx context.Context, c agentv1.AgentServiceClient) error {
			_, err := c.Answer(ctx, &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "yes"})
			return err
		},
		"CancelRun": func(ctx context.Context, c agentv1.AgentServiceClient) error {
			_, err := c.CancelRun(ctx, &agentv1.CancelRunRequest{RunId: res.GetRunId()})
			return err
		},
		"WatchRun of an unknown run": func(ctx context.Context, c agentv1.AgentServiceClient) error {
			stream, err := c.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: "unknown"})
			if err != nil {
				return err
			}
			_, err = stream.Recv()
			return err
		},
	}
	var wg sync.WaitGroup
	for i, c := range h.replicas {
		for name, call := range calls {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), deadline)
				defer cancel()
				err := call(ctx, c)
				if status.Code(err) != codes.Unavailable {
					t.Errorf("%s on replica %d with NATS down: %v, want UNAVAILABLE", name, i, err)
				}
			})
		}
	}
	wg.Wait()

	// NATS comes back for the mesh to shut down.
	nats, err = events.StartEmbedded(events.EmbeddedOptions{StoreDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
}

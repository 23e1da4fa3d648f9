package mesh_test

import (
	"context"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/protobuf/proto"
)

// TestWatchRunOnTheOwnerGetsALargeResultWhole watches, on the replica that runs it, a run
// whose result is too large for one NATS message, so that the stream's run_finished leaves the
// result out: the watcher, following the run live as it finishes, gets the whole result all
// the same. Before, the replica read the result back with GetRun, which found the run still
// live (it publishes its result to its callers after its run_finished event) and answered
// FAILED_PRECONDITION, and the watcher got run_finished with result_omitted and no result.
func TestWatchRunOnTheOwnerGetsALargeResultWhole(t *testing.T) {
	const size = 1_500_000 // over NATS's default payload limit (1 MB)
	hold := make(chan struct{})
	h := start(t, nil, llmtest.Scenario{Name: "large", Match: "large history*", Turns: []llmtest.Turn{{Content: "read it all", Hold: hold}}})
	history := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "large history:" + strings.Repeat(" all work and no play", size/21)}}
	req := &agentv1.RunRequest{
		RunId: "watched-large", Message: "Summarise the history.", History: history,
		Overrides: &agentv1.RunOverrides{ContextWindow: proto.Int64(4 * size)},
	}
	ran := make(chan error, 1)
	go func() {
		_, err := h.client.Run(t.Context(), req)
		ran <- err
	}()
	if !eventually(t, 30*time.Second, func() bool { return len(h.llm.Requests()) > 0 }) {
		t.Fatal("the run never asked the model")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stream, err := h.client.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: req.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the watch follows the run now
		t.Fatal(err)
	}
	close(hold)
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("watch ended before run_finished: %v", err)
		}
		fin := ev.GetRunFinished()
		if fin == nil {
			continue
		}
		if fin.GetResultOmitted() || fin.GetResult().GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || len(fin.GetResult().GetConversation()) < 2 {
			t.Fatalf("run_finished: result_omitted %v, outcome %s, %d messages; want the whole result",
				fin.GetResultOmitted(), fin.GetResult().GetOutcome(), len(fin.GetResult().GetConversation()))
		}
		break
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
}


package main

import (
	"context"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestStoppingActionStageFinishesItsCalls: an action stage told to stop (SIGTERM, as on every
// rollout or node drain) while a tool call runs takes no new call — an Execute sent then is
// refused UNAVAILABLE, and its tool never runs — and lets the call in flight finish, here past
// the drain every other service gets (server.DefaultDrainTimeout), within the default tool
// timeout: the run is told the tool's answer, not that it was interrupted, the tool ran once,
// and the stage exits 0 once the call is done.
func TestStoppingActionStageFinishesItsCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	const (
		runID, callID, key = "action-drain", "call-1", "slow-during-drain"
		message            = "drain: count slowly"
	)
	llm := llmtest.New(t, llmtest.Scenario{Name: "drain", Match: message, Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{bumpCall(callID, toolBump, key)}},
		{Content: "Counted while the action stage stopped."},
	}})
	tools := meshproc.NewToolServer(t)
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}, Config: meshproc.Config{
		LLM:       llm.URL(),
		RestTools: map[string]config.RestTool{toolBump: tools.Tool("Counts one more request for the key.")},
	}})
	a, action := m.Replica(t, "a"), m.Stage(t, "action")
	hold := tools.Hold(key)
	t.Cleanup(hold.Release)
	ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
	defer cancel()
	pending := goRun(func() (*typev1.RunResult, error) {
		return a.Agent().Run(ctx, &agentv1.RunRequest{RunId: runID, Message: message})
	})
	await(t, hold.Arrived(), runTimeout, "the tool's execution")

	stopStage(t, action, "action")
	args, _ := structpb.NewStruct(map[string]any{"key": "sent-after-sigterm"})
	_, err := actionv1.NewActionServiceClient(action.Conn()).Execute(ctx, &actionv1.ExecuteRequest{
		RunId: "late-run", CallId: "late-call", ToolName: toolBump, Arguments: args,
	})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("an Execute sent after SIGTERM: %v, want UNAVAILABLE", err)
	}

	// The call in flight outlives the drain every other service gets.
	outlivesDrain(t, action, "action", "a tool call", pending)
	hold.Release()
	await(t, pending.done, runTimeout, "the run")
	checkSucceeded(t, "the run whose tool call ran while the action stage stopped", pending.res, pending.err)
	checkToolSaw(t, pending.res, callID, meshproc.Answer(key, 1))
	if n := tools.Count(key); n != 1 {
		t.Errorf("the held tool ran %d times, want once", n)
	}
	if n := tools.Count("sent-after-sigterm"); n != 0 {
		t.Errorf("the tool of the Execute sent after SIGTERM ran %d times, want never", n)
	}
	exitedAfterDrain(t, action, "action")
}

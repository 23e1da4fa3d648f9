package main

import (
	"context"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/planning"
)

// TestStoppingPlanningStageFinishesItsPlans: a planning stage with a model of its own
// (models.planning), told to stop while the model plans, lets the plan finish, here past the
// drain of a stage without a model (server.DefaultDrainTimeout), within the planning model's
// timeout: the run follows the model's plan, the model was asked for it once, and the stage
// exits 0.
func TestStoppingPlanningStageFinishesItsPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	const (
		runID, callID, key = "planning-drain", "call-1", "planned-during-drain"
		message            = "drain: plan slowly"
	)
	hold, release := heldTurn(t)
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "plan", Match: "Goal: " + message + "\n*", Turns: []llmtest.Turn{{Hold: hold, ToolCalls: []llmtest.ToolCall{{
			Name: planning.PlanTool, Arguments: `{"viable": true, "steps": [{"id": "count", "description": "Count once", "tool": "` + toolBump + `"}]}`}}}}},
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{bumpCall(callID, toolBump, key)}},
			{Content: "Counted as planned."},
		}},
	)
	tools := meshproc.NewToolServer(t)
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}, Config: meshproc.Config{
		LLM:         llm.URL(),
		RestTools:   map[string]config.RestTool{toolBump: tools.Tool("Counts one more request for the key.")},
		StageModels: map[string]string{"planning": "planner"},
	}})
	a, stage := m.Replica(t, "a"), m.Stage(t, "planning")
	ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
	defer cancel()
	pending := goRun(func() (*typev1.RunResult, error) {
		return a.Agent().Run(ctx, &agentv1.RunRequest{RunId: runID, Message: message})
	})
	planned := func() int { return askedModel(llm, "planner") }
	if !poll(t, runTimeout, func() bool { return planned() > 0 }) {
		t.Fatal("the planning model was never asked")
	}

	stopStage(t, stage, "planning")

	// The plan in flight outlives the drain of a stage without a model.
	outlivesDrain(t, stage, "planning", "its model's plan", pending)
	release()
	await(t, pending.done, runTimeout, "the run")
	checkSucceeded(t, "the run planned while the planning stage stopped", pending.res, pending.err)
	if plan := pending.res.GetPlan(); len(plan) != 1 || plan[0].GetStep().GetId() != "count" {
		t.Errorf("plan %v, want the planning model's", plan)
	}
	if n := planned(); n != 1 {
		t.Errorf("the planning model was asked %d times, want once", n)
	}
	exitedAfterDrain(t, stage, "planning")
}

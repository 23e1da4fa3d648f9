package main

import (
	"context"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestStoppingGenerationStageFinishesItsAnswers: a generation stage told to stop (SIGTERM, as
// on every rollout or node drain) while a model answers lets the answer finish, here past the
// drain every other service gets (server.DefaultDrainTimeout), within the default step
// timeout: the run is told the answer, the model was asked once (not paid again by a retry),
// and the stage exits 0 once the answer is sent.
func TestStoppingGenerationStageFinishesItsAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	const (
		runID, message = "generation-drain", "drain: answer slowly"
		answer         = "Answered while the generation stage stopped."
	)
	hold, release := heldTurn(t)
	llm := llmtest.New(t, llmtest.Scenario{Name: "drain", Match: message, Turns: []llmtest.Turn{
		{Content: answer, Hold: hold},
	}})
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}, Config: meshproc.Config{LLM: llm.URL()}})
	a, generation := m.Replica(t, "a"), m.Stage(t, "generation")
	ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
	defer cancel()
	pending := goRun(func() (*typev1.RunResult, error) {
		return a.Agent().Run(ctx, &agentv1.RunRequest{RunId: runID, Message: message})
	})
	if !poll(t, runTimeout, func() bool { return len(llm.Requests()) > 0 }) {
		t.Fatal("the model was never asked")
	}

	stopStage(t, generation, "generation")

	// The answer in flight outlives the drain every other service gets.
	outlivesDrain(t, generation, "generation", "a model's answer", pending)
	release()
	await(t, pending.done, runTimeout, "the run")
	checkSucceeded(t, "the run whose model answered while the generation stage stopped", pending.res, pending.err)
	if got := pending.res.GetFinalReport().GetContent(); got != answer {
		t.Errorf("the run answered %q, want %q", got, answer)
	}
	if n := len(llm.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	exitedAfterDrain(t, generation, "generation")
}

package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/intent"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStoppingIntentStageFinishesItsParses: an intent stage with a model of its own
// (models.intent), told to stop while the model reads the run's message, lets the answer
// finish, here past the drain of a stage without a model (server.DefaultDrainTimeout), within
// the default step timeout: the run is accounted the intent model's request, the model was
// asked once, and the stage exits 0.
func TestStoppingIntentStageFinishesItsParses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	const message = "drain: read slowly"
	hold := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "intent", Match: intent.ModelInputPrefix + message,
			Turns: []llmtest.Turn{{Hold: hold, ToolCalls: []llmtest.ToolCall{{
				Name: intent.ModelTool, Arguments: `{"goal": "` + message + `", ` +
					`"constraints": [], "task_type": "question", "needs_clarification": false, ` +
					`"unsafe": false}`}}}}},
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{{Content: "Read."}}},
	)
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}, Config: meshproc.Config{
		LLM:         llm.URL(),
		StageModels: map[string]string{"intent": "intent-model"},
	}})
	a, stage := m.Replica(t, "a"), m.Stage(t, "intent")
	ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
	defer cancel()
	pending := goRun(func() (*typev1.RunResult, error) {
		return a.Agent().Run(ctx, &agentv1.RunRequest{Message: message})
	})
	parsed := func() int {
		n := 0
		for _, r := range llm.Requests() {
			if r.Model == "intent-model" {
				n++
			}
		}
		return n
	}
	if !poll(t, runTimeout, func() bool { return parsed() > 0 }) {
		t.Fatal("the intent model was never asked")
	}

	stage.Signal(t, syscall.SIGTERM)
	if !poll(t, runTimeout, func() bool {
		_, err := stage.Health(t.Context())
		return status.Code(err) == codes.Unavailable
	}) {
		t.Fatal("the intent stage still answers health checks after SIGTERM")
	}

	// The answer in flight outlives the drain of a stage without a model.
	outlives := server.DefaultDrainTimeout + 2*time.Second
	past := time.NewTimer(outlives)
	defer past.Stop()
	select {
	case <-stage.Exited(t):
		t.Fatalf("the intent stage exited within %s of SIGTERM, with its model's answer in flight",
			outlives)
	case <-pending.done:
		t.Fatalf("the run ended while its intent was held: %v, %v", pending.res, pending.err)
	case <-past.C:
	}
	release()
	await(t, pending.done, runTimeout, "the run")
	checkSucceeded(t, "the run parsed while the intent stage stopped", pending.res, pending.err)
	var accounted bool
	for _, e := range pending.res.GetAccounting() {
		accounted = accounted || e.GetStage() == "intent" && e.GetModel() == "intent-model"
	}
	if !accounted {
		t.Errorf("accounting %v, want the intent model's request", pending.res.GetAccounting())
	}
	if n := parsed(); n != 1 {
		t.Errorf("the intent model was asked %d times, want once", n)
	}
	if err := stage.Wait(t); err != nil {
		t.Errorf("the intent stage exited with %v after its drain, want status 0", err)
	}
}

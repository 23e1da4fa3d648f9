package main

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/memory"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestStoppingMemoryStageFinishesItsLearning: a memory stage whose model picks the facts of
// finished runs (models.memory), told to stop while that model answers, lets the learning
// finish, here past the drain of a stage without a model (server.DefaultDrainTimeout), within
// memory.LearnTimeout: it reports NOT_SERVING meanwhile, records what it learned, asked the
// model once, and exits 0. Cut off, the learning would be done again, the model asked (and
// paid) again, by the next memory stage.
func TestStoppingMemoryStageFinishesItsLearning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	const (
		message = "Remember that my locker is number 12."
		fact    = "The user's locker is number 12."
	)
	hold, release := heldTurn(t)
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{{Content: "Noted."}}},
		llmtest.Scenario{Name: "facts", Match: "User: " + message + "*", Turns: []llmtest.Turn{{Hold: hold, ToolCalls: []llmtest.ToolCall{{
			Name: memory.FactsTool, Arguments: `{"facts": [{"text": "` + fact + `", "importance": 0.9}]}`}}}}},
	)
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}, Config: meshproc.Config{
		LLM:         llm.URL(),
		StageModels: map[string]string{"memory": "memorizer"},
	}})
	a, stage := m.Replica(t, "a"), m.Stage(t, "memory")
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	res, err := a.Agent().Run(ctx, &agentv1.RunRequest{Message: message, UserId: "alice"})
	checkSucceeded(t, "the run", res, err)
	learning := func() int { return askedModel(llm, "memorizer") }
	if !poll(t, runTimeout, func() bool { return learning() > 0 }) {
		t.Fatal("the memory model was never asked")
	}

	stage.Signal(t, syscall.SIGTERM)
	if !poll(t, runTimeout, func() bool {
		st, err := stage.Health(t.Context())
		return err == nil && st == healthpb.HealthCheckResponse_NOT_SERVING
	}) {
		t.Fatal("the memory stage does not report NOT_SERVING after SIGTERM while it learns")
	}
	// The learning in flight outlives the drain of a stage without a model.
	outlivesDrain(t, stage, "memory", "its model's facts", nil)
	release()
	exitedAfterDrain(t, stage, "memory")
	if logs := stage.Logs(); !strings.Contains(logs, "learned from a finished run") || !strings.Contains(logs, "LEARNING_METHOD_MODEL") {
		t.Errorf("the memory stage did not record the model's facts before it exited:\n%s", logs)
	}
	if n := learning(); n != 1 {
		t.Errorf("the memory model was asked %d times, want once", n)
	}
}

// TestStoppingMemoryStageFinishesItsEmbeddings: a memory stage that embeds what it learns
// (memory.embeddings) without a model of its own, told to stop while the embedding of a
// finished run's facts is slow, lets the learning finish, here past the drain of a stage
// without embeddings (server.DefaultDrainTimeout): it records what it learned with its vectors,
// asked for the embedding once, and exits 0. Cut off, the next learner would take the run only
// once its claim ran out (memory.LearnLease), and embed it again.
func TestStoppingMemoryStageFinishesItsEmbeddings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	const (
		message = "Remember that my locker is number 12."
		fact    = "The user's locker is number 12."
	)
	hold, release := heldTurn(t)
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{{Content: "Noted."}}})
	llm.HoldEmbeddings(fact, hold)
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}, Config: meshproc.Config{
		LLM:        llm.URL(),
		Embeddings: "embedder",
	}})
	a, stage := m.Replica(t, "a"), m.Stage(t, "memory")
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	res, err := a.Agent().Run(ctx, &agentv1.RunRequest{Message: message, UserId: "alice"})
	checkSucceeded(t, "the run", res, err)
	embedding := func() int {
		n := 0
		for _, r := range llm.Requests() {
			if r.Model == "embedder" && slices.Contains(r.Input, fact) {
				n++
			}
		}
		return n
	}
	if !poll(t, runTimeout, func() bool { return embedding() > 0 }) {
		t.Fatal("the facts were never embedded")
	}

	stage.Signal(t, syscall.SIGTERM)
	outlivesDrain(t, stage, "memory", "the embedding of its facts", nil)
	release()
	exitedAfterDrain(t, stage, "memory")
	logs := stage.Logs()
	if !strings.Contains(logs, "learned from a finished run") {
		t.Errorf("the memory stage did not record the facts before it exited:\n%s", logs)
	}
	if strings.Contains(logs, "embedding learned facts failed") {
		t.Errorf("the memory stage stored the facts without their vectors:\n%s", logs)
	}
	if n := embedding(); n != 1 {
		t.Errorf("the facts were embedded %d times, want once", n)
	}
}

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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	hold := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
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

	generation.Signal(t, syscall.SIGTERM)
	if !poll(t, runTimeout, func() bool {
		_, err := generation.Health(t.Context())
		return status.Code(err) == codes.Unavailable
	}) {
		t.Fatal("the generation stage still answers health checks after SIGTERM")
	}

	// The answer in flight outlives the drain every other service gets.
	outlives := server.DefaultDrainTimeout + 2*time.Second
	past := time.NewTimer(outlives)
	defer past.Stop()
	select {
	case <-generation.Exited(t):
		t.Fatalf("the generation stage exited within %s of SIGTERM, with a model's answer in flight", outlives)
	case <-pending.done:
		t.Fatalf("the run ended while its model's answer was held: %v, %v", pending.res, pending.err)
	case <-past.C:
	}
	release()
	await(t, pending.done, runTimeout, "the run")
	checkSucceeded(t, "the run whose model answered while the generation stage stopped", pending.res, pending.err)
	if got := pending.res.GetFinalReport().GetContent(); got != answer {
		t.Errorf("the run answered %q, want %q", got, answer)
	}
	if n := len(llm.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	if err := generation.Wait(t); err != nil {
		t.Errorf("the generation stage exited with %v after its drain, want status 0", err)
	}
}

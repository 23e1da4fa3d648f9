package main

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestAFrozenReplicaPublishesNothingForTheRunItLost freezes replica a (SIGSTOP) while its run
// waits for the model, for longer than its heartbeat lives, so that b takes the run over; the
// model answers both, and a is let go on (SIGCONT) with its answer waiting in its socket once
// b has moved on. a must publish nothing more for the run: its run waits for its keeper,
// which finds the heartbeat lapsed and the run b's, and stops it. Before, a published the
// answer it was given (a second llm_response for the turn, among b's events) until its next
// checkpoint conflicted with b's.
func TestAFrozenReplicaPublishesNothingForTheRunItLost(t *testing.T) {
	const (
		runID   = "frozen-replica"
		message = "frozen: the replica stalls while the model answers"
		key     = "frozen"
	)
	inferHold, answerHold := make(chan struct{}), make(chan struct{})
	llm := llmtest.New(t, llmtest.Scenario{Name: "frozen", Match: message, Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{bumpCall(crashCallID, toolBump, key)}, Hold: inferHold},
		{Content: "Done after the freeze.", Hold: answerHold},
	}})
	tools := meshproc.NewToolServer(t)
	m := durableMesh(t, llm, tools)
	a, b := m.Replica(t, "a"), m.Replica(t, "b")
	t.Cleanup(func() {
		if a.Running() {
			a.Signal(t, syscall.SIGCONT) // the test failed while a was frozen
		}
	})

	ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
	defer cancel()
	client := goRun(retrying(ctx, m.Client(), 0, &agentv1.RunRequest{RunId: runID, IdempotencyKey: runID, Message: message}))
	if !poll(t, runTimeout, func() bool { return llmRequests(llm, message, 0) > 0 }) {
		t.Fatal("the first inference never reached the model")
	}
	a.Signal(t, syscall.SIGSTOP)
	m.WaitEvent(t, runID, "run_resumed", takeoverTimeout)
	if !poll(t, runTimeout, func() bool { return llmRequests(llm, message, 0) > 1 }) {
		t.Fatal("b never asked the model again")
	}
	close(inferHold) // both replicas' requests are answered; a's answer waits in its socket
	m.WaitEvent(t, runID, "tool_finished", runTimeout)

	a.Signal(t, syscall.SIGCONT)
	if !poll(t, runTimeout, func() bool { return strings.Contains(a.Logs(), "run stopped on this replica") }) {
		t.Fatalf("replica a never stopped the run b took over; its logs:\n%s", a.Logs())
	}
	close(answerHold)

	checkSurvived(t, m, b, runID, leaseExpired, typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS)
	client.check(t, runID, typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS)
	responses := map[int32]int{}
	for _, ev := range m.StoredEvents(t, runID) {
		if r := ev.GetLlmResponse(); r != nil {
			responses[r.GetTurn()]++
		}
	}
	if responses[1] != 1 || responses[2] != 1 || len(responses) != 2 {
		t.Errorf("llm_response events by turn: %v, want one for each of turns 1 and 2 (a frozen replica published for a run it lost)", responses)
	}
	if n := tools.Count(key); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
}

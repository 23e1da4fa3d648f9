package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestRollingRestart proves that a deploy ends no run (issue 10, item 5). Fifty runs are in
// flight, started half on replica a and half on b by clients that retry UNAVAILABLE on the other
// replica with their idempotency key, when a is stopped with SIGTERM and started again, then b.
// Each run has executed its tool and waits for the model's final answer, which is held until
// both replicas have been restarted, so every run is live through both stops. Each replica must
// exit cleanly (status 0) within its drain time, handing its runs over; every run must then
// finish exactly once, be recorded as resumed, answer its client with its outcome, and have
// executed its tool exactly once.
func TestRollingRestart(t *testing.T) {
	const runs = 50
	release := make(chan struct{})
	llm := llmtest.New(t, llmtest.Scenario{Name: "rolling", Match: "rolling *", Turns: []llmtest.Turn{
		{DelayMS: 50, Respond: func(req llmtest.Request, _ int) llmtest.Turn {
			key := strings.ReplaceAll(firstUserMessage(req), " ", "-")
			return llmtest.Turn{ToolCalls: []llmtest.ToolCall{bumpCall("call-1", toolBump, key)}}
		}},
		{Content: "Rolled over.", Hold: release},
	}})
	tools := meshproc.NewToolServer(t)
	m := durableMesh(t, llm, tools)
	a, b := m.Replica(t, "a"), m.Replica(t, "b")

	ctx, cancel := context.WithTimeout(t.Context(), 3*runTimeout)
	defer cancel()
	client := m.Client()
	pending := make([]*pendingRun, runs)
	for i := range runs {
		key := fmt.Sprintf("rolling-%d", i)
		pending[i] = goRun(retrying(ctx, client, i, &agentv1.RunRequest{Message: strings.ReplaceAll(key, "-", " "), IdempotencyKey: key}))
	}
	if !poll(t, runTimeout, func() bool {
		for i := range runs {
			if tools.Count(fmt.Sprintf("rolling-%d", i)) == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("not every run executed its tool")
	}

	for _, r := range []*meshproc.Service{a, b} {
		if err := r.Stop(t); err != nil {
			t.Errorf("replica %s did not exit cleanly on SIGTERM: %v", r.Name(), err)
		}
		r.Restart(t)
	}
	close(release)

	for i, p := range pending {
		key := fmt.Sprintf("rolling-%d", i)
		await(t, p.done, 2*runTimeout, "the client of "+key)
		if p.err != nil {
			t.Errorf("%s: Run failed: %v", key, p.err)
			continue
		}
		runID := p.res.GetRunId()
		if p.res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
			t.Errorf("%s: run %s ended %s %v", key, runID, p.res.GetOutcome(), p.res.GetError())
		}
		checkEventLog(t, m, runID)
		if m.CountEvents(t, runID, "run_resumed") == 0 {
			t.Errorf("%s: run %s was live through both stops but has no run_resumed event", key, runID)
		} else if got := m.WaitEvent(t, runID, "run_resumed", runTimeout).GetRunResumed(); got.GetReason() != handedOff {
			t.Errorf("%s: run %s was taken over %v, want for the reason %q", key, runID, got, handedOff)
		}
		if n := tools.Count(key); n != 1 {
			t.Errorf("%s: the tool ran %d times, want 1", key, n)
		}
	}
}

package mesh_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestEveryStartedEventEnds (issue 11.4, seed 002 §9): a run cancelled while a tool runs
// still publishes the tool's tool_finished after its tool_started, and a run whose step times
// out while the model answers publishes an llm_response for every LLM attempt it accounts:
// the run's events are published outside its cancellation.
func TestEveryStartedEventEnds(t *testing.T) {
	arrived, stop := make(chan struct{}, 1), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select { // held until its client gives up or the test ends
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(stop) }) // before Close, which waits for the held request
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"slow_lookup": {Description: "A lookup that never answers.", URL: slow.URL}}
	h := start(t, cfg,
		llmtest.Scenario{Name: "cancel", Match: "cancel the lookup", Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "slow_lookup", Arguments: `{}`}}}, text("never"),
		}},
		llmtest.Scenario{Name: "timeout", Match: "time the model out", Turns: []llmtest.Turn{{Failure: llmtest.FailTimeout}}},
	)

	t.Run("cancelled while a tool runs", func(t *testing.T) {
		done := make(chan *typev1.RunResult, 1)
		go func() {
			res, _ := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "cancel the lookup", RunId: "cancel-the-lookup"})
			done <- res
		}()
		<-arrived
		if _, err := h.client.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: "cancel-the-lookup"}); err != nil {
			t.Fatal(err)
		}
		if res := <-done; res.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED {
			t.Fatalf("outcome %s, want INTERRUPTED", res.GetOutcome())
		}
		evs, _ := h.storedEvents(t, "cancel-the-lookup")
		started, finished := 0, 0
		for _, ev := range evs {
			if ev.GetToolStarted() != nil {
				started++
			}
			if ev.GetToolFinished() != nil {
				finished++
			}
		}
		if started != 1 || finished != 1 {
			t.Errorf("%d tool_started and %d tool_finished, want 1 and 1", started, finished)
		}
	})

	t.Run("step timed out while the model answers", func(t *testing.T) {
		res := h.run(t, &agentv1.RunRequest{Message: "time the model out", Overrides: &agentv1.RunOverrides{StepTimeoutMs: i64(300), MaxRetries: i32(1)}})
		if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_TIMEOUT {
			t.Fatalf("outcome %s %s, want FAILED_TIMEOUT", res.GetOutcome(), res.GetExitReason())
		}
		attempts := llmAttempts(res)
		evs, _ := h.storedEvents(t, res.GetRunId())
		responses := 0
		for _, ev := range evs {
			if ev.GetLlmResponse() != nil {
				responses++
			}
		}
		if attempts == 0 || responses != attempts {
			t.Errorf("%d LLM attempts accounted, %d llm_response events, want as many (and at least one)", attempts, responses)
		}
	})
}

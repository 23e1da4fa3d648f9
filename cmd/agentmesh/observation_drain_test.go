package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/protobuf/proto"
)

// TestStoppingObservationStageFinishesItsSummaries: an observation stage with a model of its
// own (models.observation), told to stop while the model summarises a large tool result, lets
// the summary finish, here past the drain of a stage without a model
// (server.DefaultDrainTimeout), within the default step timeout: the run is told the summary,
// the model was asked for it once, and the stage exits 0.
func TestStoppingObservationStageFinishesItsSummaries(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	const (
		message = "drain: summarise slowly"
		summary = "Apples: 40 crates in the north warehouse."
	)
	stock := "inventory\n" + strings.Repeat("sku-1 apples 1 crate, warehouse north\n", 40)
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(stock)) }))
	t.Cleanup(tools.Close)
	hold, release := heldTurn(t)
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{{Name: "stock_report", Arguments: `{}`}}}, {Content: "40 crates of apples."}}},
		llmtest.Scenario{Name: "summary", Match: stock, Turns: []llmtest.Turn{{Content: summary, Hold: hold}}},
	)
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}, Config: meshproc.Config{
		LLM:         llm.URL(),
		RestTools:   map[string]config.RestTool{"stock_report": {Description: "The stock report.", URL: tools.URL}},
		StageModels: map[string]string{"observation": "summarizer"},
	}})
	a, stage := m.Replica(t, "a"), m.Stage(t, "observation")
	ctx, cancel := context.WithTimeout(t.Context(), 2*runTimeout)
	defer cancel()
	pending := goRun(func() (*typev1.RunResult, error) {
		return a.Agent().Run(ctx, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{ToolResponseMaxBytes: proto.Int64(200)}})
	})
	summarised := func() int { return askedModel(llm, "summarizer") }
	if !poll(t, runTimeout, func() bool { return summarised() > 0 }) {
		t.Fatal("the observation model was never asked")
	}

	stopStage(t, stage, "observation")

	// The summary in flight outlives the drain of a stage without a model.
	outlivesDrain(t, stage, "observation", "its model's summary", pending)
	release()
	await(t, pending.done, runTimeout, "the run")
	checkSucceeded(t, "the run whose result was summarised while the observation stage stopped", pending.res, pending.err)
	var observed string
	for _, msg := range pending.res.GetConversation() {
		if msg.GetRole() == typev1.Role_ROLE_TOOL {
			observed = msg.GetContent()
		}
	}
	if !strings.Contains(observed, summary) {
		t.Errorf("the run was told %q of its tool call, want the summary %q", observed, summary)
	}
	if n := summarised(); n != 1 {
		t.Errorf("the observation model was asked %d times, want once", n)
	}
	exitedAfterDrain(t, stage, "observation")
}

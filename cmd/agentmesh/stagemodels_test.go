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
	"github.com/agentmesh/agentmesh/services/intent"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/planning"
	"google.golang.org/protobuf/proto"
)

// TestStageModelsAsProcesses (issue 13): each stage binary asks its own model
// (models.intent, .planning, .observation, .memory in the configuration file the processes
// read) through the generation binary: the intent, the plan, the summary of a large tool
// result and the facts learned all come from the scripted models over real HTTP, and every
// stage's request is in the run's accounting under the stage's name.
func TestStageModelsAsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts agentmesh as separate processes")
	}
	const (
		message = "What is in stock today?"
		summary = "Apples: 40 crates in the north warehouse."
		fact    = "The user keeps apples in the north warehouse."
	)
	stock := "inventory\n" + strings.Repeat("sku-1 apples 1 crate, warehouse north\n", 40)
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(stock)) }))
	t.Cleanup(tools.Close)
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "intent", Match: intent.ModelInputPrefix + message, Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{{
			Name: intent.ModelTool, Arguments: `{"goal": "` + message + `", "constraints": [], "task_type": "question", "needs_clarification": false, "unsafe": false}`}}}}},
		llmtest.Scenario{Name: "plan", Match: "Goal: " + message + "\n*", Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{{
			Name: planning.PlanTool, Arguments: `{"viable": true, "steps": [{"id": "look", "description": "Read the stock report", "tool": "stock_report"}]}`}}}}},
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{{Name: "stock_report", Arguments: `{}`}}}, {Content: "40 crates of apples."}}},
		llmtest.Scenario{Name: "summary", Match: stock, Turns: []llmtest.Turn{{Content: summary}}},
		llmtest.Scenario{Name: "facts", Match: "User: " + message + "*", Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{{
			Name: memory.FactsTool, Arguments: `{"facts": [{"text": "` + fact + `", "importance": 0.7}]}`}}}}},
	)
	m := meshproc.Start(t, meshproc.Options{Replicas: []string{"a"}, Config: meshproc.Config{
		LLM:         llm.URL(),
		RestTools:   map[string]config.RestTool{"stock_report": {Description: "The stock report.", URL: tools.URL}},
		StageModels: map[string]string{"intent": "intent-model", "planning": "planner", "observation": "summarizer", "memory": "memory-model"},
	}})
	a := m.Replica(t, "a")
	ctx, cancel := context.WithTimeout(t.Context(), runTimeout)
	defer cancel()
	res, err := a.Agent().Run(ctx, &agentv1.RunRequest{Message: message, UserId: "alice", Overrides: &agentv1.RunOverrides{ToolResponseMaxBytes: proto.Int64(200)}})
	checkSucceeded(t, "the run", res, err)
	if res.GetFinalReport().GetContent() != "40 crates of apples." {
		t.Errorf("final report %q", res.GetFinalReport().GetContent())
	}

	stages := map[string]string{}
	for _, e := range res.GetAccounting() {
		if e.GetStage() != "" {
			stages[e.GetStage()] = e.GetModel()
		}
	}
	for stage, model := range map[string]string{"intent": "intent-model", "planning": "planner", "observation": "summarizer"} {
		if stages[stage] != model {
			t.Errorf("accounting by stage %v: want %s's request to %s", stages, stage, model)
		}
	}
	if plan := res.GetPlan(); len(plan) != 1 || plan[0].GetStep().GetId() != "look" || plan[0].GetState() != typev1.StepState_STEP_STATE_DONE {
		t.Errorf("plan %v, want the planner's step, done", plan)
	}
	var observed string
	for _, msg := range res.GetConversation() {
		if msg.GetRole() == typev1.Role_ROLE_TOOL {
			observed = msg.GetContent()
		}
	}
	if !strings.HasSuffix(observed, summary) || !strings.HasPrefix(observed, "[SUMMARIZED]") {
		t.Errorf("the model saw %q, want the summarizer's summary", observed)
	}

	var learned *typev1.RunResult
	if !poll(t, runTimeout, func() bool {
		got, err := a.Agent().GetRun(ctx, &agentv1.GetRunRequest{RunId: res.GetRunId()})
		learned = got
		return err == nil && got.GetLearning().GetMethod() != typev1.LearningMethod_LEARNING_METHOD_UNSPECIFIED
	}) {
		t.Fatalf("nothing was learned from the run: %v", learned.GetLearning())
	}
	if l := learned.GetLearning(); l.GetMethod() != typev1.LearningMethod_LEARNING_METHOD_MODEL || len(l.GetAccounting()) != 1 || l.GetAccounting()[0].GetModel() != "memory-model" {
		t.Errorf("learning %v, want the memory model's facts", l)
	}
	mems, err := a.Agent().ListMemories(ctx, &agentv1.ListMemoriesRequest{UserId: "alice"})
	if err != nil || len(mems.GetMemories()) != 1 || mems.GetMemories()[0].GetContent() != fact {
		t.Errorf("alice's memories %v, %v; want the learned fact", mems.GetMemories(), err)
	}
}

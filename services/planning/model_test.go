package planning_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"github.com/agentmesh/agentmesh/services/planning"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
)

// modelClient is a planning service whose model is a scripted OpenAI-compatible server behind
// the real generation service.
func modelClient(t *testing.T, scenarios ...llmtest.Scenario) (planningv1.PlanningServiceClient, *llmtest.Server) {
	t.Helper()
	return modelClientWith(t, planning.Options{}, scenarios...)
}

// modelClientWith is modelClient with opts (its Model is set).
func modelClientWith(t *testing.T, opts planning.Options, scenarios ...llmtest.Scenario) (planningv1.PlanningServiceClient, *llmtest.Server) {
	t.Helper()
	llm := llmtest.New(t, scenarios...)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	gen := generation.New(generation.Options{Providers: map[string]generation.Provider{
		"scripted": generation.NewOpenAI(generation.OpenAIOptions{Name: "scripted", BaseURL: llm.URL(), APIKey: "k", HTTPClient: &http.Client{Transport: tr}}),
	}})
	opts.Model = &ask.Model{
		Client: generationv1.NewGenerationServiceClient(grpctest.Serve(t, gen.Register)),
		Target: &typev1.Target{Provider: "scripted", Model: "planner"},
	}
	return client(t, opts), llm
}

// planned answers a planning request whose goal is goal with a call of submit_plan.
func planned(goal, arguments string) llmtest.Scenario {
	return llmtest.Scenario{Name: goal, Match: "Goal: " + goal + "\n*", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: planning.PlanTool, Arguments: arguments}}},
	}}
}

func TestModelPlan(t *testing.T) {
	c, llm := modelClient(t,
		planned("report the time and a sum", `{"viable": true, "estimated_steps": 4, "steps": [
			{"id": "time", "description": "read the clock", "tool": "current_time"},
			{"id": "sum", "description": "add the numbers", "tool": "calculator"},
			{"id": "report", "description": "write the report", "depends_on": ["time", "sum"]}]}`),
		planned("publish the notes", `{"viable": true, "requires_human_approval": true, "steps": [{"id": "a", "description": "post them"}]}`),
	)
	resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{
		Goal: "report the time and a sum", TaskType: "analysis", Constraints: []string{"in 3 sentences"},
		AvailableTools: catalogue, MaxSteps: 5, RunId: "run-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	assertSteps(t, resp.GetSteps(), []step{
		{"time", "read the clock", "current_time", nil},
		{"sum", "add the numbers", "calculator", nil},
		{"report", "write the report", "", []string{"time", "sum"}},
	})
	if resp.GetSource() != planning.SourceModel || resp.GetFallbackReason() != "" || resp.GetEstimatedSteps() != 4 || resp.GetRequiresHumanApproval() {
		t.Errorf("source %q, fallback %q, estimated %d, approval %v", resp.GetSource(), resp.GetFallbackReason(), resp.GetEstimatedSteps(), resp.GetRequiresHumanApproval())
	}
	if a := resp.GetAccounting(); len(a) != 1 || a[0].GetType() != typev1.AccountingType_ACCOUNTING_TYPE_LLM || a[0].GetModel() != "planner" ||
		a[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK || a[0].GetTokens().GetTotal() == 0 || a[0].GetActualModel() == "" {
		t.Errorf("accounting %v, want the planner's request", a)
	}

	// The request: the goal, task type, constraints, step limit and tools, one forced tool.
	req := llm.Requests()[0]
	if len(req.Tools) != 1 || req.Tools[0].Function.Name != planning.PlanTool || string(req.ToolChoice) != `"required"` {
		t.Fatalf("tools %+v, tool_choice %s", req.Tools, req.ToolChoice)
	}
	var params struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(req.Tools[0].Function.Parameters, &params); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"viable", "reason", "steps", "requires_human_approval", "estimated_steps"} {
		if params.Properties[p] == nil {
			t.Errorf("the schema has no %s: %s", p, req.Tools[0].Function.Parameters)
		}
	}
	if !strings.Contains(string(params.Properties["steps"]), `"depends_on"`) {
		t.Errorf("the steps' schema has no depends_on: %s", params.Properties["steps"])
	}
	system, user := string(req.Messages[0].Content), string(req.Messages[1].Content)
	if !strings.Contains(system, "at most 5 steps") {
		t.Errorf("the instructions do not give the step limit: %s", system)
	}
	for _, want := range []string{"Goal: report the time and a sum\n", "Task type: analysis\n", "- in 3 sentences\n", "Step limit: 5\n",
		"- calculator: Evaluates an arithmetic expression\n", "- send-email: Sends an email message to a recipient (requires a person's approval)\n"} {
		if !strings.Contains(user, want) {
			t.Errorf("the input lacks %q:\n%s", want, user)
		}
	}

	// The model asks for a person's approval although no tool requires it.
	resp, err = c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "publish the notes", AvailableTools: catalogue})
	if err != nil || !resp.GetRequiresHumanApproval() || resp.GetEstimatedSteps() != 2 {
		t.Errorf("approval %v, estimated %d, %v", resp.GetRequiresHumanApproval(), resp.GetEstimatedSteps(), err)
	}
}

// TestModelFallback makes the rules' plan when the model fails or its plan is unusable, and
// says why.
func TestModelFallback(t *testing.T) {
	const goal = "What time is it in Tokyo?"
	rulesPlan := []step{{"step-1", goal, "current_time", nil}}
	table := []struct {
		name     string
		turn     llmtest.Turn
		reason   string
		accounts typev1.AccountingStatus
	}{
		{"text instead of a plan", llmtest.Turn{Content: "Just look at a clock."}, "did not call submit_plan", typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
		{"garbage arguments", llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: planning.PlanTool, Arguments: `{"steps": "first the clock"}`}}},
			"do not match its schema", typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
		{"an unknown tool", llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: planning.PlanTool,
			Arguments: `{"viable": true, "steps": [{"id": "a", "description": "ask the oracle", "tool": "oracle"}]}`}}},
			`the planning model's plan was refused: step "a" uses tool "oracle", which is not available`, typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
		{"a cycle", llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: planning.PlanTool,
			Arguments: `{"viable": true, "steps": [{"id": "a", "description": "x", "depends_on": ["b"]}, {"id": "b", "description": "y", "depends_on": ["a"]}]}`}}},
			"circular dependency: a → b → a", typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
		{"no steps", llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: planning.PlanTool, Arguments: `{"viable": true, "steps": []}`}}},
			"the planning model's plan has no steps", typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
		{"the provider fails", llmtest.Turn{Failure: llmtest.FailModelError}, "the planning model failed", typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED},
		// A plan the provider's content filter stopped midway is not the model's plan, though
		// its arguments, repaired, would pass the schema with the steps written so far.
		{"stopped by the content filter", llmtest.Turn{FinishReason: "content_filter", ToolCalls: []llmtest.ToolCall{{Name: planning.PlanTool,
			Arguments: `{"viable": true, "steps": [{"id": "a", "description": "read the clock", "tool": "current_time"}`}}},
			"the provider's content filter stopped the answer (stop reason content_filter)", typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
		// Arguments cut off at the output limit are refused by the generation stage; the
		// reason says so, not that the (absent) arguments lack every property.
		{"cut off at the output limit", llmtest.Turn{FinishReason: "length", ToolCalls: []llmtest.ToolCall{{Name: planning.PlanTool,
			Arguments: `{"viable": true, "steps": [{"id": "a", "description": "read the clock", "tool": "current_time"}`}}},
			"the arguments were cut off at the output token limit", typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := modelClient(t, llmtest.Scenario{Name: tc.name, Match: "Goal: " + goal + "\n*", Turns: []llmtest.Turn{tc.turn}})
			resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: goal, AvailableTools: catalogue})
			if err != nil {
				t.Fatal(err)
			}
			assertSteps(t, resp.GetSteps(), rulesPlan)
			if resp.GetSource() != planning.SourceRules || !strings.Contains(resp.GetFallbackReason(), tc.reason) {
				t.Errorf("source %q, fallback %q; want rules because %q", resp.GetSource(), resp.GetFallbackReason(), tc.reason)
			}
			if a := resp.GetAccounting(); len(a) != 1 || a[0].GetStatus() != tc.accounts {
				t.Errorf("accounting %v, want one %s entry", a, tc.accounts)
			}
		})
	}
}

// TestModelTimeout makes the rules' plan when the model does not answer in its time.
func TestModelTimeout(t *testing.T) {
	const goal = "What time is it in Tokyo?"
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	c, _ := modelClientWith(t, planning.Options{ModelTimeout: 50 * time.Millisecond},
		llmtest.Scenario{Name: "slow", Match: "Goal: " + goal + "\n*", Turns: []llmtest.Turn{{Hold: hold}}})
	resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: goal, AvailableTools: catalogue})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetSource() != planning.SourceRules || !strings.Contains(resp.GetFallbackReason(), "the planning model failed") || len(resp.GetSteps()) != 1 {
		t.Errorf("source %q, fallback %q, steps %v", resp.GetSource(), resp.GetFallbackReason(), resp.GetSteps())
	}
}

// TestModelFailures are the model's judgements that end planning: no viable plan, or more steps
// than the limit. Their status carries the model's request for the run's accounting.
func TestModelFailures(t *testing.T) {
	c, _ := modelClient(t,
		planned("fly me to the moon", `{"viable": false, "reason": "no tool books space flights", "steps": []}`),
		planned("build a house", `{"viable": true, "steps": [{"id": "a", "description": "walls"}, {"id": "b", "description": "roof"}, {"id": "c", "description": "door"}]}`),
	)
	_, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "fly me to the moon", AvailableTools: catalogue})
	se := grpctest.WantStageError(t, err, codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
		"the planning model found no viable plan: no tool books space flights")
	if len(se.Accounting) != 1 || se.Accounting[0].GetModel() != "planner" {
		t.Errorf("accounting %v, want the planner's request", se.Accounting)
	}
	_, err = c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "build a house", AvailableTools: catalogue, MaxSteps: 2})
	se = grpctest.WantStageError(t, err, codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX,
		"the planning model's plan has 3 steps, the limit is 2")
	if len(se.Accounting) != 1 {
		t.Errorf("accounting %v, want the planner's request", se.Accounting)
	}
}

// TestRevision revises a plan: by the rules, a failed step's tool is not given again; the
// model gets the plan so far with each step's state and the reason.
func TestRevision(t *testing.T) {
	revision := &planningv1.PlanRevision{Reason: "step step-2 (calculator) failed: division by zero", Steps: []*typev1.StepProgress{
		{Step: &typev1.Step{Id: "step-1", Description: "read the clock", ToolName: "current_time"}, State: typev1.StepState_STEP_STATE_DONE,
			Output: &structpb.Struct{Fields: map[string]*structpb.Value{"hour": structpb.NewNumberValue(9)}}},
		{Step: &typev1.Step{Id: "step-2", Description: "calculate 15% of 80", ToolName: "calculator", DependsOn: []string{"step-1"}},
			State: typev1.StepState_STEP_STATE_FAILED, Note: "division by zero"},
		{Step: &typev1.Step{Id: "step-3", Description: "search the knowledge base", ToolName: "knowledge_search", DependsOn: []string{"step-2"}},
			State: typev1.StepState_STEP_STATE_PENDING},
	}}
	resp, err := client(t, planning.Options{}).Plan(t.Context(), &planningv1.PlanRequest{Goal: "g", AvailableTools: catalogue, Revision: revision})
	if err != nil {
		t.Fatal(err)
	}
	assertSteps(t, resp.GetSteps(), []step{
		{"step-1", "read the clock", "current_time", nil},
		{"step-2", "calculate 15% of 80", "", []string{"step-1"}},
		{"step-3", "search the knowledge base", "knowledge_search", []string{"step-2"}},
	})
	if resp.GetEstimatedSteps() != 3 || resp.GetSource() != planning.SourceRules {
		t.Errorf("estimated %d (want the 2 steps to do + 1), source %q", resp.GetEstimatedSteps(), resp.GetSource())
	}

	c, llm := modelClient(t, planned("g", `{"viable": true, "steps": [
		{"id": "step-1", "description": "read the clock", "tool": "current_time"},
		{"id": "step-2b", "description": "work it out by hand", "depends_on": ["step-1"]}]}`))
	resp, err = c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "g", AvailableTools: catalogue, Revision: revision})
	if err != nil || resp.GetSource() != planning.SourceModel || len(resp.GetSteps()) != 2 {
		t.Fatalf("%v %v", resp, err)
	}
	user := string(llm.Requests()[0].Messages[1].Content)
	for _, want := range []string{"The plan so far:\n", "- step-1 [done]: read the clock (tool: current_time) → {\"hour\":9}\n",
		"- step-2 [failed: division by zero]: calculate 15% of 80 (tool: calculator; after step-1)\n",
		"- step-3 [pending]: search the knowledge base (tool: knowledge_search; after step-2)\n",
		"Revise it because: step step-2 (calculator) failed: division by zero\n"} {
		if !strings.Contains(user, want) {
			t.Errorf("the revision input lacks %q:\n%s", want, user)
		}
	}
}

func TestRevisionInvalid(t *testing.T) {
	c := client(t, planning.Options{})
	done := &typev1.StepProgress{Step: &typev1.Step{Id: "a"}, State: typev1.StepState_STEP_STATE_DONE}
	for _, tc := range []struct {
		name string
		req  *planningv1.PlanRequest
		part string
	}{
		{"no steps", &planningv1.PlanRequest{Goal: "g", Revision: &planningv1.PlanRevision{}}, "revision.steps must not be empty"},
		{"no step", &planningv1.PlanRequest{Goal: "g", Revision: &planningv1.PlanRevision{Steps: []*typev1.StepProgress{done, {State: typev1.StepState_STEP_STATE_DONE}}}}, "revision.steps[1].step must be set"},
		{"no state", &planningv1.PlanRequest{Goal: "g", Revision: &planningv1.PlanRevision{Steps: []*typev1.StepProgress{{Step: &typev1.Step{Id: "a"}}}}}, "revision.steps[0].state must be pending, done or failed"},
		{"with proposed steps", &planningv1.PlanRequest{Goal: "g", ProposedSteps: []*typev1.Step{{Id: "a"}}, Revision: &planningv1.PlanRevision{Steps: []*typev1.StepProgress{done}}},
			"proposed_steps and revision exclude each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Plan(t.Context(), tc.req)
			grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.part)
		})
	}
}

// TestRevisionInvalidBeforeTheModel: a revision whose plan is broken (a step without an id,
// an id twice, a dependency on no step) is INVALID_ARGUMENT naming the revision's step, before
// the planning model is asked: the model was asked (and paid for) first, and the rules then
// refused the plan as "proposed step 2", a field the request does not have.
func TestRevisionInvalidBeforeTheModel(t *testing.T) {
	c, llm := modelClient(t, planned("g", `{"viable": true, "steps": [{"id": "a", "description": "think"}]}`))
	progress := func(steps ...*typev1.Step) *planningv1.PlanRevision {
		rev := &planningv1.PlanRevision{Reason: "a step failed"}
		for _, st := range steps {
			rev.Steps = append(rev.Steps, &typev1.StepProgress{Step: st, State: typev1.StepState_STEP_STATE_PENDING})
		}
		return rev
	}
	a := &typev1.Step{Id: "a", Description: "think"}
	for _, tc := range []struct {
		name string
		rev  *planningv1.PlanRevision
		part string
	}{
		{"empty id", progress(a, &typev1.Step{Id: " ", Description: "answer"}), "revision.steps[1].step.id must not be empty"},
		{"id twice", progress(a, a), `revision.steps[1].step.id "a" repeats revision.steps[0]'s`},
		{"unknown dependency", progress(a, &typev1.Step{Id: "b", DependsOn: []string{"zz"}}),
			`revision.steps[1].step.depends_on: "zz" is no step of the revision`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "g", AvailableTools: catalogue, Revision: tc.rev})
			grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.part)
		})
	}
	if n := len(llm.Requests()); n != 0 {
		t.Errorf("the planning model was asked %d times about invalid revisions", n)
	}
}

// TestModelRevisionKeepsDoneSteps: a revision keeps the steps that are done as they were
// (PlanRevision); a model's revision that rewrites or drops one is unusable, and the rules
// revise the plan instead, saying why.
func TestModelRevisionKeepsDoneSteps(t *testing.T) {
	revision := &planningv1.PlanRevision{Reason: "step step-2 (calculator) failed: division by zero", Steps: []*typev1.StepProgress{
		{Step: &typev1.Step{Id: "step-1", Description: "read the clock", ToolName: "current_time"}, State: typev1.StepState_STEP_STATE_DONE},
		{Step: &typev1.Step{Id: "step-2", Description: "calculate 15% of 80", ToolName: "calculator", DependsOn: []string{"step-1"}},
			State: typev1.StepState_STEP_STATE_FAILED, Note: "division by zero"},
	}}
	rulesRevision := []step{{"step-1", "read the clock", "current_time", nil}, {"step-2", "calculate 15% of 80", "", []string{"step-1"}}}
	for _, tc := range []struct {
		name, plan, reason string
	}{
		{"rewritten", `{"viable": true, "steps": [
			{"id": "step-1", "description": "read the clock in Tokyo", "tool": "current_time"},
			{"id": "step-2b", "description": "work it out by hand", "depends_on": ["step-1"]}]}`,
			`done step "step-1" is not kept as it was`},
		{"another tool", `{"viable": true, "steps": [
			{"id": "step-1", "description": "read the clock", "tool": "knowledge_search"},
			{"id": "step-2b", "description": "work it out by hand", "depends_on": ["step-1"]}]}`,
			`done step "step-1" is not kept as it was`},
		{"dropped", `{"viable": true, "steps": [{"id": "step-2b", "description": "work it out by hand"}]}`,
			`done step "step-1" is missing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := modelClient(t, planned("g", tc.plan))
			resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "g", AvailableTools: catalogue, Revision: revision})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetSource() != planning.SourceRules || !strings.Contains(resp.GetFallbackReason(), tc.reason) {
				t.Fatalf("source %q, fallback %q; want the rules because %q", resp.GetSource(), resp.GetFallbackReason(), tc.reason)
			}
			assertSteps(t, resp.GetSteps(), rulesRevision)
			if len(resp.GetAccounting()) != 1 {
				t.Errorf("accounting %v, want the planner's request", resp.GetAccounting())
			}
		})
	}
}

// TestRevisionApproval: a revised plan requires a person's approval for the steps still to
// do; a done step whose tool required approval was approved and ran already.
func TestRevisionApproval(t *testing.T) {
	sent := &typev1.StepProgress{Step: &typev1.Step{Id: "step-1", Description: "email the summary to Ann", ToolName: "send-email"},
		State: typev1.StepState_STEP_STATE_DONE}
	failed := &typev1.StepProgress{Step: &typev1.Step{Id: "step-2", Description: "calculate 15% of 80", ToolName: "calculator", DependsOn: []string{"step-1"}},
		State: typev1.StepState_STEP_STATE_FAILED, Note: "division by zero"}
	toWrite := &typev1.StepProgress{Step: &typev1.Step{Id: "step-3", Description: "write it to a file", ToolName: "fs__write_file", DependsOn: []string{"step-2"}},
		State: typev1.StepState_STEP_STATE_PENDING}
	c := client(t, planning.Options{})
	for _, tc := range []struct {
		name  string
		steps []*typev1.StepProgress
		want  bool
	}{
		{"only a done step needs approval", []*typev1.StepProgress{sent, failed}, false},
		{"a step to do needs approval", []*typev1.StepProgress{sent, failed, toWrite}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "g", AvailableTools: catalogue,
				Revision: &planningv1.PlanRevision{Reason: "step step-2 (calculator) failed: division by zero", Steps: tc.steps}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetRequiresHumanApproval() != tc.want {
				t.Errorf("requires_human_approval = %v, want %v (steps %v)", resp.GetRequiresHumanApproval(), tc.want, resp.GetSteps())
			}
		})
	}
}

// TestModelEstimateOutOfRange: an estimate of model turns past what PlanResponse's int32
// estimated_steps holds is an answer outside the schema, which the rules stand in for; it was
// taken, and wrapped around to a negative estimate.
func TestModelEstimateOutOfRange(t *testing.T) {
	const goal = "What time is it in Tokyo?"
	c, _ := modelClient(t, planned(goal, `{"viable": true, "estimated_steps": 3000000000,
		"steps": [{"id": "a", "description": "read the clock", "tool": "current_time"}]}`))
	resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: goal, AvailableTools: catalogue})
	if err != nil {
		t.Fatal(err)
	}
	fallback := resp.GetFallbackReason()
	if resp.GetSource() != planning.SourceRules || !strings.Contains(fallback, "estimated_steps") ||
		resp.GetEstimatedSteps() != 2 {
		t.Errorf("source %q, fallback %q, estimated %d; want the rules' plan and estimate "+
			"because of estimated_steps", resp.GetSource(), fallback, resp.GetEstimatedSteps())
	}
}

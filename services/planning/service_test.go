package planning_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/planning"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, opts planning.Options) planningv1.PlanningServiceClient {
	t.Helper()
	return planningv1.NewPlanningServiceClient(grpctest.Serve(t, planning.New(opts).Register))
}

// catalogue is a small set of tools like the built-ins of a dev mesh.
var catalogue = []*typev1.Tool{
	{Name: "calculator", Description: "Evaluates an arithmetic expression"},
	{Name: "current_time", Description: "Returns the current date and time in a time zone"},
	{Name: "knowledge_search", Description: "Searches the knowledge base for relevant documents"},
	{Name: "fs__write_file", Description: "Writes content to a file in the workspace", RequiresApproval: true},
	{Name: "send-email", Description: "Sends an email message to a recipient", RequiresApproval: true},
}

// step is a compact way to write an expected step.
type step struct {
	id, description, tool string
	deps                  []string
}

func assertSteps(t *testing.T, got []*typev1.Step, want []step) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d steps %v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.GetId() != w.id || g.GetDescription() != w.description || g.GetToolName() != w.tool || !slices.Equal(g.GetDependsOn(), w.deps) {
			t.Errorf("step %d = {%q %q %q %v}, want {%q %q %q %v}", i, g.GetId(), g.GetDescription(), g.GetToolName(),
				g.GetDependsOn(), w.id, w.description, w.tool, w.deps)
		}
	}
}

func TestGeneratedPlans(t *testing.T) {
	table := []struct {
		name        string
		goal        string
		taskType    string
		constraints []string
		tools       []*typev1.Tool
		steps       []step
		approval    bool
	}{
		{name: "plain question is one reasoning step", goal: "What is the capital of France?", taskType: "question",
			tools: catalogue, steps: []step{{"step-1", "What is the capital of France?", "", nil}}},
		{name: "question matched to a tool", goal: "What time is it in Tokyo?", tools: catalogue,
			steps: []step{{"step-1", "What time is it in Tokyo?", "current_time", nil}}},
		{name: "arithmetic in words goes to the calculator, not to current_time", goal: "What is 6 times 7?", tools: catalogue,
			steps: []step{{"step-1", "What is 6 times 7?", "calculator", nil}}},
		{name: "arithmetic in symbols", goal: "how much is (2+3)*4", tools: catalogue,
			steps: []step{{"step-1", "how much is (2+3)*4", "calculator", nil}}},
		{name: "time words without numbers stay with current_time", goal: "What time is it in Tokyo at times like these?", tools: catalogue,
			steps: []step{{"step-1", "What time is it in Tokyo at times like these?", "current_time", nil}}},
		{name: "stemmed match", goal: "calculate 17 * 23", taskType: "TASK_TYPE_ACTION", tools: catalogue,
			steps: []step{{"step-1", "calculate 17 * 23", "calculator", nil}}},
		{name: "then and and then", goal: "Search the knowledge base for the refund policy, then calculate 15% of 80 and then email the summary to Ann.",
			tools: catalogue, approval: true, steps: []step{
				{"step-1", "Search the knowledge base for the refund policy", "knowledge_search", nil},
				{"step-2", "calculate 15% of 80", "calculator", []string{"step-1"}},
				{"step-3", "email the summary to Ann", "send-email", []string{"step-2"}},
			}},
		{name: "semicolons and sequence words", goal: "First, check the current time; next write it to a file; finally say thanks",
			tools: catalogue, approval: true, steps: []step{
				{"step-1", "check the current time", "current_time", nil},
				{"step-2", "write it to a file", "fs__write_file", []string{"step-1"}},
				{"step-3", "say thanks", "", []string{"step-2"}},
			}},
		{name: "numbered and bulleted lines", goal: "1. look up the holiday policy in the knowledge base\n2) work out 3 * 7\n- tell me the date",
			tools: catalogue, steps: []step{
				{"step-1", "look up the holiday policy in the knowledge base", "knowledge_search", nil},
				{"step-2", "work out 3 * 7", "calculator", []string{"step-1"}},
				{"step-3", "tell me the date", "current_time", []string{"step-2"}},
			}},
		{name: "pasted code is one step", goal: "Find the bug: int a = 1; int b = a / 0; printf(b);", tools: catalogue,
			steps: []step{{"step-1", "Find the bug: int a = 1; int b = a / 0; printf(b)", "", nil}}},
		{name: "lines of code join the line before", goal: "Explain this loop\nfor (i = 0; i < n; i++) {\n  sum += a[i];\n}\nthen tell me the date",
			tools: catalogue, steps: []step{
				{"step-1", "Explain this loop for (i = 0; i < n; i++) { sum += a[i] }", "", nil},
				{"step-2", "tell me the date", "current_time", []string{"step-1"}},
			}},
		{name: "given text is one step", goal: "Summarize this: the river rose; the bells rang, then the village woke.", tools: catalogue,
			steps: []step{{"step-1", "Summarize this: the river rose; the bells rang, then the village woke", "", nil}}},
		{name: "given text after a step", goal: "What time is it? Then proofread: the river rose; the bells rang", tools: catalogue,
			steps: []step{{"step-1", "What time is it?", "current_time", nil}, {"step-2", "proofread: the river rose; the bells rang", "", []string{"step-1"}}}},
		{name: "a colon that announces steps", goal: "Do the following: check the current time; then work out 3 * 7", tools: catalogue,
			steps: []step{{"step-1", "Do the following: check the current time", "current_time", nil}, {"step-2", "work out 3 * 7", "calculator", []string{"step-1"}}}},
		{name: "a time is no given text", goal: "Tell me the time at 10:30; then work out 3 * 7", tools: catalogue,
			steps: []step{{"step-1", "Tell me the time at 10:30", "current_time", nil}, {"step-2", "work out 3 * 7", "calculator", []string{"step-1"}}}},
		{name: "code only in the first clause", goal: "Set x = 3; then work out 3 * 7", tools: catalogue,
			steps: []step{{"step-1", "Set x = 3", "", nil}, {"step-2", "work out 3 * 7", "calculator", []string{"step-1"}}}},
		{name: "name beats description", goal: "weather in Paris", tools: []*typev1.Tool{
			{Name: "forecast", Description: "Weather forecast for a city"}, {Name: "weather", Description: "Current conditions"}},
			steps: []step{{"step-1", "weather in Paris", "weather", nil}}},
		{name: "tie goes to the first listed", goal: "search for documents about time zones", tools: catalogue,
			steps: []step{{"step-1", "search for documents about time zones", "current_time", nil}}},
		{name: "negative constraint rules a tool out", goal: "What time is it in Tokyo?", constraints: []string{"without current_time"},
			tools: catalogue, steps: []step{{"step-1", "What time is it in Tokyo?", "", nil}}},
		{name: "spaced negative constraint", goal: "email Ann the notes", constraints: []string{"don't use send email"},
			tools: catalogue, steps: []step{{"step-1", "email Ann the notes", "", nil}}},
		{name: "no tools at all", goal: "calculate 2+2", constraints: []string{"without using any tools"},
			tools: catalogue, steps: []step{{"step-1", "calculate 2+2", "", nil}}},
		{name: "don't use tools", goal: "What is 6*7?", constraints: []string{"Don't use tools"},
			tools: catalogue, steps: []step{{"step-1", "What is 6*7?", "", nil}}},
		{name: "no tools but one", goal: "What is 6*7? Then tell me the time", constraints: []string{"don't use tools other than the calculator"},
			tools: catalogue, steps: []step{{"step-1", "What is 6*7?", "calculator", nil}, {"step-2", "tell me the time", "", []string{"step-1"}}}},
		{name: "naming one tool as a tool rules out only it", goal: "What time is it? Then calculate 6*7", constraints: []string{"don't use the current time tool"},
			tools: catalogue, steps: []step{{"step-1", "What time is it?", "", nil}, {"step-2", "calculate 6*7", "calculator", []string{"step-1"}}}},
		{name: "positive constraint keeps the tool", goal: "email Ann the notes", constraints: []string{"using send-email"},
			tools: catalogue, approval: true, steps: []step{{"step-1", "email Ann the notes", "send-email", nil}}},
		{name: "no tools at all for a question", goal: "why is the sky blue", taskType: "question",
			steps: []step{{"step-1", "why is the sky blue", "", nil}}},
		{name: "creative task without tools", goal: "Write a haiku about rain", taskType: "creative",
			steps: []step{{"step-1", "Write a haiku about rain", "", nil}}},
	}
	c := client(t, planning.Options{})
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{
				Goal: tc.goal, TaskType: tc.taskType, Constraints: tc.constraints, AvailableTools: tc.tools,
			})
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			assertSteps(t, resp.GetSteps(), tc.steps)
			if got := resp.GetEstimatedSteps(); got != int32(len(tc.steps)+1) {
				t.Errorf("estimated_steps = %d, want %d", got, len(tc.steps)+1)
			}
			if resp.GetRequiresHumanApproval() != tc.approval {
				t.Errorf("requires_human_approval = %v, want %v", resp.GetRequiresHumanApproval(), tc.approval)
			}
		})
	}
}

func TestProposedStepsOrderedAndNormalised(t *testing.T) {
	c := client(t, planning.Options{})
	resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{
		Goal:           "report the time and a sum",
		AvailableTools: catalogue,
		ProposedSteps: []*typev1.Step{
			{Id: " report ", Description: " write the report ", DependsOn: []string{"sum", "time", "sum"}},
			{Id: "sum", Description: "add the numbers", ToolName: "calculator", DependsOn: []string{" time "}},
			{Id: "greet", Description: "say hello"},
			{Id: "time", Description: "read the clock", ToolName: "current_time"},
		},
	})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	assertSteps(t, resp.GetSteps(), []step{
		{"greet", "say hello", "", nil},
		{"time", "read the clock", "current_time", nil},
		{"sum", "add the numbers", "calculator", []string{"time"}},
		{"report", "write the report", "", []string{"sum", "time"}},
	})
	if resp.GetEstimatedSteps() != 5 || resp.GetRequiresHumanApproval() {
		t.Errorf("estimated_steps %d, approval %v; want 5, false", resp.GetEstimatedSteps(), resp.GetRequiresHumanApproval())
	}
}

func TestProposedStepsApproval(t *testing.T) {
	c := client(t, planning.Options{})
	resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{
		Goal:           "save the answer",
		AvailableTools: catalogue,
		ProposedSteps: []*typev1.Step{
			{Id: "a", Description: "compute", ToolName: "calculator"},
			{Id: "b", Description: "save", ToolName: "fs__write_file", DependsOn: []string{"a"}},
		},
	})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if !resp.GetRequiresHumanApproval() {
		t.Error("a step using fs__write_file (requires_approval) did not set requires_human_approval")
	}
}

func TestStepLimit(t *testing.T) {
	chain := func(n int) []*typev1.Step {
		steps := make([]*typev1.Step, n)
		for i := range steps {
			steps[i] = &typev1.Step{Id: fmt.Sprintf("s%d", i), Description: "think"}
		}
		return steps
	}
	clauses := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("do thing %d", i)
		}
		return strings.Join(parts, "; ")
	}
	table := []struct {
		name     string
		opts     planning.Options
		req      *planningv1.PlanRequest
		ok       bool
		contains string
	}{
		{"20 proposed fit the default", planning.Options{}, &planningv1.PlanRequest{Goal: "g", ProposedSteps: chain(20)}, true, ""},
		{"21 proposed exceed the default", planning.Options{}, &planningv1.PlanRequest{Goal: "g", ProposedSteps: chain(21)}, false, "plan has 21 steps, the limit is 20"},
		{"request limit", planning.Options{}, &planningv1.PlanRequest{Goal: "g", MaxSteps: 2, ProposedSteps: chain(3)}, false, "plan has 3 steps, the limit is 2"},
		{"configured default", planning.Options{DefaultMaxSteps: 3}, &planningv1.PlanRequest{Goal: "g", ProposedSteps: chain(4)}, false, "plan has 4 steps, the limit is 3"},
		{"request overrides configured default", planning.Options{DefaultMaxSteps: 3}, &planningv1.PlanRequest{Goal: "g", MaxSteps: 4, ProposedSteps: chain(4)}, true, ""},
		{"20 clauses fit", planning.Options{}, &planningv1.PlanRequest{Goal: clauses(20)}, true, ""},
		{"21 clauses exceed", planning.Options{}, &planningv1.PlanRequest{Goal: clauses(21)}, false, "the goal has 21 steps, the limit is 20"},
		{"clauses over request limit", planning.Options{}, &planningv1.PlanRequest{Goal: "a then b then c", MaxSteps: 2}, false, "the goal has 3 steps, the limit is 2"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client(t, tc.opts).Plan(t.Context(), tc.req)
			if tc.ok {
				if err != nil {
					t.Fatalf("Plan: %v", err)
				}
				if len(resp.GetSteps()) == 0 {
					t.Fatal("no steps")
				}
				return
			}
			assertFailure(t, err, codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX, tc.contains)
		})
	}
}

func TestPlanFailures(t *testing.T) {
	table := []struct {
		name     string
		req      *planningv1.PlanRequest
		grpc     codes.Code
		code     typev1.StageErrorCode
		contains string
	}{
		{"empty goal", &planningv1.PlanRequest{Goal: "  "}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "goal must not be empty"},
		{"run id over 128 bytes", &planningv1.PlanRequest{Goal: "g", RunId: strings.Repeat("r", 129)}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "run_id: run id is 129 bytes long; at most 128 are allowed"},
		{"run id with a dot", &planningv1.PlanRequest{Goal: "g", RunId: "run.1"}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `run_id: run id "run.1" contains '.' at byte 3`},
		{"negative max_steps", &planningv1.PlanRequest{Goal: "g", MaxSteps: -1}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "max_steps must not be negative, got -1"},
		{"unknown task type", &planningv1.PlanRequest{Goal: "g", TaskType: "chores"}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `unknown task_type "chores"`},
		{"tool without a name", &planningv1.PlanRequest{Goal: "g", AvailableTools: []*typev1.Tool{{Description: "x"}}}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "available_tools[0] has an empty name"},
		{"tool listed twice", &planningv1.PlanRequest{Goal: "g", AvailableTools: []*typev1.Tool{{Name: "calculator"}, {Name: "calculator"}}}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `tool "calculator" appears twice`},
		{"empty step id", &planningv1.PlanRequest{Goal: "g", ProposedSteps: []*typev1.Step{{Id: "a"}, {Id: " "}}}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "proposed_steps[1].id must not be empty"},
		{"duplicate step id", &planningv1.PlanRequest{Goal: "g", ProposedSteps: []*typev1.Step{{Id: "a"}, {Id: "a"}}}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `proposed_steps: duplicate step id "a"`},
		{"unknown dependency", &planningv1.PlanRequest{Goal: "g", ProposedSteps: []*typev1.Step{{Id: "a", DependsOn: []string{"zz"}}}}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `proposed_steps: step "a" depends on unknown step "zz"`},
		{"unavailable tool", &planningv1.PlanRequest{Goal: "g", AvailableTools: catalogue, ProposedSteps: []*typev1.Step{{Id: "a", ToolName: "rm_everything"}}},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
			`step "a" uses tool "rm_everything", which is not available (available: calculator, current_time, fs__write_file, knowledge_search, send-email)`},
		{"tool with none available", &planningv1.PlanRequest{Goal: "g", ProposedSteps: []*typev1.Step{{Id: "a", ToolName: "calculator"}}},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN, `uses tool "calculator", which is not available (no tools are available)`},
		{"two-step cycle", &planningv1.PlanRequest{Goal: "g", ProposedSteps: []*typev1.Step{{Id: "a", DependsOn: []string{"b"}}, {Id: "b", DependsOn: []string{"a"}}}},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN, "circular dependency: a → b → a"},
		{"self dependency", &planningv1.PlanRequest{Goal: "g", ProposedSteps: []*typev1.Step{{Id: "x"}, {Id: "a", DependsOn: []string{"a"}}}},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN, "circular dependency: a → a"},
		{"cycle behind a chain", &planningv1.PlanRequest{Goal: "g", ProposedSteps: []*typev1.Step{
			{Id: "start", DependsOn: []string{"b"}}, {Id: "b", DependsOn: []string{"c"}}, {Id: "c", DependsOn: []string{"d"}}, {Id: "d", DependsOn: []string{"b"}}}},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN, "circular dependency: b → c → d → b"},
		{"action without tools", &planningv1.PlanRequest{Goal: "delete the old logs", TaskType: "action"},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN, "needs a tool but none is available"},
		{"action whose constraints rule out every tool", &planningv1.PlanRequest{Goal: "calculate 2+2 without the calculator", TaskType: "action",
			Constraints: []string{"without the calculator"}, AvailableTools: []*typev1.Tool{{Name: "calculator"}}},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN, "the constraints rule out every available tool (calculator)"},
		{"action whose constraints rule out tools in general", &planningv1.PlanRequest{Goal: "delete the old logs", TaskType: "action",
			Constraints: []string{"without any tools"}, AvailableTools: []*typev1.Tool{{Name: "calculator"}, {Name: "delete_file"}}},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN, "the constraints rule out every available tool (calculator, delete_file)"},
	}
	c := client(t, planning.Options{})
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Plan(t.Context(), tc.req)
			assertFailure(t, err, tc.grpc, tc.code, tc.contains)
		})
	}
}

func TestGoalSizeLimit(t *testing.T) {
	c := client(t, planning.Options{MaxGoalBytes: 8})
	if _, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "12345678"}); err != nil {
		t.Fatalf("a goal of exactly the limit was refused: %v", err)
	}
	_, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "123456789"})
	assertFailure(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "goal is 9 bytes, the limit is 8 bytes")
}

func assertFailure(t *testing.T, err error, grpc codes.Code, code typev1.StageErrorCode, contains string) {
	t.Helper()
	if got := status.Code(err); got != grpc {
		t.Fatalf("grpc code = %v (%v), want %v", got, err, grpc)
	}
	se := stageerr.FromError(err)
	if se.Code != code {
		t.Errorf("stage code = %v, want %v", se.Code, code)
	}
	if !strings.Contains(se.Msg, contains) {
		t.Errorf("message = %q, want it to contain %q", se.Msg, contains)
	}
}

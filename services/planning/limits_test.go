package planning_test

import (
	"fmt"
	"strings"
	"testing"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"github.com/agentmesh/agentmesh/services/planning"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestRequestLimits: a request over one of the planning stage's limits (max_steps,
// constraints, available_tools, a proposed or revised step's fields) is INVALID_ARGUMENT
// naming the field and the limit, before any plan is made; a request at every limit is
// planned.
func TestRequestLimits(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	many := func(n int, s string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint(s, i)
		}
		return out
	}
	proposed := func(st *typev1.Step) *planningv1.PlanRequest {
		return &planningv1.PlanRequest{Goal: "g", ProposedSteps: []*typev1.Step{{Id: "a"}, st}}
	}
	revised := func(st *typev1.Step) *planningv1.PlanRequest {
		return &planningv1.PlanRequest{Goal: "g", Revision: &planningv1.PlanRevision{Reason: "r",
			Steps: []*typev1.StepProgress{
				{Step: &typev1.Step{Id: "a"}, State: typev1.StepState_STEP_STATE_DONE},
				{Step: st, State: typev1.StepState_STEP_STATE_PENDING},
			}}}
	}
	noted := func(p *typev1.StepProgress) *planningv1.PlanRequest {
		return &planningv1.PlanRequest{Goal: "g", Revision: &planningv1.PlanRevision{Reason: "r",
			Steps: []*typev1.StepProgress{
				{Step: &typev1.Step{Id: "a"}, State: typev1.StepState_STEP_STATE_DONE}, p}}}
	}
	bigOutput, err := structpb.NewStruct(map[string]any{"x": long(plan.MaxOutputBytes)})
	if err != nil {
		t.Fatal(err)
	}
	progress := make([]*typev1.StepProgress, plan.MaxStepsLimit+1)
	for i := range progress {
		progress[i] = &typev1.StepProgress{Step: &typev1.Step{Id: fmt.Sprint("s", i)},
			State: typev1.StepState_STEP_STATE_PENDING}
	}
	tools := func(n int) []*typev1.Tool {
		out := make([]*typev1.Tool, n)
		for i := range out {
			out[i] = &typev1.Tool{Name: fmt.Sprint("tool_", i)}
		}
		return out
	}
	table := []struct {
		name     string
		req      *planningv1.PlanRequest
		contains string
	}{
		{"max_steps", &planningv1.PlanRequest{Goal: "g", MaxSteps: plan.MaxStepsLimit + 1},
			"max_steps: at most 1000, got 1001"},
		{"constraints",
			&planningv1.PlanRequest{Goal: "g", Constraints: many(planning.MaxConstraints+1, "c")},
			"constraints: at most 1000, got 1001"},
		{"constraints' bytes", &planningv1.PlanRequest{Goal: "g",
			Constraints: []string{long(planning.MaxConstraintsBytes), "x"}},
			"constraints: at most 131072 bytes in all, got 131073"},
		{"available_tools", &planningv1.PlanRequest{Goal: "g",
			AvailableTools: tools(planning.MaxTools + 1)}, "available_tools: at most 1000, got 1001"},
		{"a tool's name", &planningv1.PlanRequest{Goal: "g", AvailableTools: []*typev1.Tool{
			{Name: "a"}, {Name: long(toolname.MaxRequestBytes + 1)}}},
			"available_tools[1].name: at most 512 bytes, got 513"},
		{"the tools' descriptions", &planningv1.PlanRequest{Goal: "g", AvailableTools: []*typev1.Tool{
			{Name: "a", Description: long(planning.MaxToolDescriptionsBytes)},
			{Name: "b", Description: "x"}}},
			"available_tools: descriptions at most 1048576 bytes in all, got 1048577"},
		{"a proposed step's id", proposed(&typev1.Step{Id: long(planning.MaxStepIDBytes + 1)}),
			"proposed_steps[1].id: at most 256 bytes, got 257"},
		{"a proposed step's description",
			proposed(&typev1.Step{Id: "b", Description: long(planning.DefaultMaxGoalBytes + 1)}),
			"proposed_steps[1].description: at most 65536 bytes (as the goal), got 65537"},
		{"a proposed step's tool",
			proposed(&typev1.Step{Id: "b", ToolName: long(toolname.MaxRequestBytes + 1)}),
			"proposed_steps[1].tool_name: at most 512 bytes, got 513"},
		{"a proposed step's dependencies",
			proposed(&typev1.Step{Id: "b", DependsOn: many(plan.MaxStepsLimit+1, "d")}),
			"proposed_steps[1].depends_on: at most 1000 ids, got 1001"},
		{"a proposed step's dependency",
			proposed(&typev1.Step{Id: "b", DependsOn: []string{"a", long(planning.MaxStepIDBytes + 1)}}),
			"proposed_steps[1].depends_on[1]: at most 256 bytes, got 257"},
		{"a revised step's id", revised(&typev1.Step{Id: long(planning.MaxStepIDBytes + 1)}),
			"revision.steps[1].step.id: at most 256 bytes, got 257"},
		{"a revised step's description",
			revised(&typev1.Step{Id: "b", Description: long(planning.DefaultMaxGoalBytes + 1)}),
			"revision.steps[1].step.description: at most 65536 bytes (as the goal), got 65537"},
		{"a revised step's tool",
			revised(&typev1.Step{Id: "b", ToolName: long(toolname.MaxRequestBytes + 1)}),
			"revision.steps[1].step.tool_name: at most 512 bytes, got 513"},
		{"a revised step's dependencies",
			revised(&typev1.Step{Id: "b", DependsOn: many(plan.MaxStepsLimit+1, "d")}),
			"revision.steps[1].step.depends_on: at most 1000 ids, got 1001"},
		{"the revision's reason", &planningv1.PlanRequest{Goal: "g",
			Revision: &planningv1.PlanRevision{Reason: long(plan.MaxReasonBytes + 1),
				Steps: []*typev1.StepProgress{{Step: &typev1.Step{Id: "a"},
					State: typev1.StepState_STEP_STATE_FAILED}}}},
			"revision.reason: at most 65536 bytes, got 65537"},
		{"a revised step's note", noted(&typev1.StepProgress{Step: &typev1.Step{Id: "b"},
			State: typev1.StepState_STEP_STATE_FAILED, Note: long(plan.MaxNoteBytes + 1)}),
			"revision.steps[1].note: at most 1024 bytes, got 1025"},
		{"a revised step's output", noted(&typev1.StepProgress{Step: &typev1.Step{Id: "b"},
			State: typev1.StepState_STEP_STATE_DONE, Output: bigOutput}),
			"revision.steps[1].output: at most 1024 bytes of JSON, got 1032"},
		{"the revision's steps", &planningv1.PlanRequest{Goal: "g",
			Revision: &planningv1.PlanRevision{Reason: "r", Steps: progress}},
			"revision.steps: at most 1000, got 1001"},
	}
	c := client(t, planning.Options{})
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Plan(t.Context(), tc.req)
			assertFailure(t, err, codes.InvalidArgument,
				typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.contains)
		})
	}

	// At every limit, the request is planned.
	chain := make([]*typev1.Step, plan.MaxStepsLimit)
	for i := range chain {
		chain[i] = &typev1.Step{Id: fmt.Sprint("s", i)}
		if i > 0 {
			chain[i].DependsOn = []string{chain[i-1].GetId()}
		}
	}
	chain[0].Id = long(planning.MaxStepIDBytes)
	chain[1].DependsOn = []string{chain[0].GetId()}
	chain[2].Description = long(planning.DefaultMaxGoalBytes)
	chain[3].ToolName = "calculator"
	cs := many(planning.MaxConstraints, "c")
	cs[0] = long(planning.MaxConstraintsBytes - len(strings.Join(cs[1:], "")))
	offered := append(tools(planning.MaxTools-len(catalogue)), catalogue...)
	offered[0].Name = long(toolname.MaxRequestBytes)
	offered[1].Description = long(planning.MaxToolDescriptionsBytes - descriptionBytes(catalogue))
	resp, err := c.Plan(t.Context(), &planningv1.PlanRequest{Goal: "g", MaxSteps: plan.MaxStepsLimit,
		Constraints: cs, AvailableTools: offered, ProposedSteps: chain})
	if err != nil {
		t.Fatalf("a request at every limit: %v", err)
	}
	if n := len(resp.GetSteps()); n != plan.MaxStepsLimit {
		t.Errorf("%d steps, want %d", n, plan.MaxStepsLimit)
	}
}

// descriptionBytes is the size of the tools' descriptions in all.
func descriptionBytes(tools []*typev1.Tool) int {
	n := 0
	for _, t := range tools {
		n += len(t.GetDescription())
	}
	return n
}

// TestModelAnswerLimits: a planning model's answer over the schema's bounds (a reason, a
// step's id, description or tool) is not used: the rules make the plan, and a reason of a
// megabyte does not become the run's NO_VIABLE_PLAN message.
func TestModelAnswerLimits(t *testing.T) {
	const goal = "What time is it in Tokyo?"
	table := []struct{ name, arguments string }{
		{"reason", `{"viable": false, "steps": [], "reason": "` + strings.Repeat("no ", 400_000) + `"}`},
		{"id", `{"viable": true, "steps": [{"id": "` + strings.Repeat("i", 65) +
			`", "description": "d"}]}`},
		{"description", `{"viable": true, "steps": [{"id": "a", "description": "` +
			strings.Repeat("d", 4001) + `"}]}`},
		{"tool", `{"viable": true, "steps": [{"id": "a", "description": "d", "tool": "` +
			strings.Repeat("t", 129) + `"}]}`},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := modelClient(t, planned(goal, tc.arguments))
			resp, err := c.Plan(t.Context(),
				&planningv1.PlanRequest{Goal: goal, AvailableTools: catalogue})
			if err != nil {
				t.Fatalf("%.200v", err)
			}
			if resp.GetSource() != planning.SourceRules ||
				!strings.Contains(resp.GetFallbackReason(), "do not match its schema") {
				t.Errorf("source %q, fallback %.200q; want the rules' plan: "+
					"the model's answer is outside its schema",
					resp.GetSource(), resp.GetFallbackReason())
			}
		})
	}
}

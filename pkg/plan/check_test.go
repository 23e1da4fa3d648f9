package plan_test

import (
	"slices"
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

func step(id, tool string, deps ...string) *typev1.Step {
	return &typev1.Step{Id: id, ToolName: tool, DependsOn: deps}
}

// TestCheck pins each rule of the planning contract, its failure code and its message.
func TestCheck(t *testing.T) {
	tools := plan.Tools([]*typev1.Tool{{Name: "calculator"}, {Name: "current_time"}})
	for _, tc := range []struct {
		name  string
		steps []*typev1.Step
		limit int
		code  typev1.StageErrorCode
		msg   string
	}{
		{"keeps every rule", []*typev1.Step{step("a", "calculator"), step("b", "", "a")}, 2, 0, ""},
		{"empty id", []*typev1.Step{step("a", ""), step(" ", "")}, 20, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "step 2 has an empty id"},
		{"duplicate id", []*typev1.Step{step("a", ""), step("a", "")}, 20, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `duplicate step id "a"`},
		{"unknown dependency", []*typev1.Step{step("a", "", "zz")}, 20, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `step "a" depends on unknown step "zz"`},
		{"over the limit", []*typev1.Step{step("a", ""), step("b", "")}, 1, typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX, "plan has 2 steps, the limit is 1"},
		{"tool not offered", []*typev1.Step{step("a", "rm")}, 20, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
			`step "a" uses tool "rm", which is not available (available: calculator, current_time)`},
		{"cycle", []*typev1.Step{step("a", "", "b"), step("b", "", "a")}, 20, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN, "circular dependency: a → b → a"},
		{"self dependency", []*typev1.Step{step("a", "", "a")}, 20, typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN, "circular dependency: a → a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := plan.Check(tc.steps, tools, tc.limit)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			se := stageerr.As(err)
			if se == nil || se.Code != tc.code || se.Error() != tc.msg {
				t.Errorf("Check = %v, want %s %q", err, stageerr.CodeName(tc.code), tc.msg)
			}
		})
	}
}

// TestOrderedAndSort: Sort puts checked steps in executable order, keeping the listed order
// among ready steps, and Ordered tells an executable order from another.
func TestOrderedAndSort(t *testing.T) {
	steps := []*typev1.Step{step("c", "", "b"), step("a", ""), step("b", "", "a"), step("d", "")}
	if err := plan.Ordered(steps); err == nil || err.Error() != `step "c" comes before step "b", which it depends on` {
		t.Errorf("Ordered = %v", err)
	}
	sorted := plan.Sort(steps)
	var ids []string
	for _, st := range sorted {
		ids = append(ids, st.GetId())
	}
	if !slices.Equal(ids, []string{"a", "b", "c", "d"}) {
		t.Errorf("Sort = %v, want [a b c d]", ids)
	}
	if err := plan.Ordered(sorted); err != nil {
		t.Errorf("Ordered(sorted) = %v", err)
	}
}

func TestKeepsDone(t *testing.T) {
	done := func(st *typev1.Step) *typev1.StepProgress {
		return &typev1.StepProgress{Step: st, State: typev1.StepState_STEP_STATE_DONE}
	}
	progress := []*typev1.StepProgress{
		done(&typev1.Step{Id: "a", Description: "send the mail", ToolName: "mail"}),
		{Step: &typev1.Step{Id: "b", Description: "file it", ToolName: "files"}, State: typev1.StepState_STEP_STATE_FAILED},
	}
	for _, tc := range []struct {
		name  string
		steps []*typev1.Step
		want  string
	}{
		{"kept, the failed step changed", []*typev1.Step{{Id: "a", Description: "send the mail", ToolName: "mail"}, {Id: "c", Description: "think"}}, ""},
		{"dropped", []*typev1.Step{{Id: "b", Description: "file it"}}, `done step "a" is missing`},
		{"rewritten", []*typev1.Step{{Id: "a", Description: "send the mail again", ToolName: "mail"}}, `done step "a" is not kept as it was`},
		{"another tool", []*typev1.Step{{Id: "a", Description: "send the mail", ToolName: "sms"}}, `done step "a" is not kept as it was`},
	} {
		err := plan.KeepsDone(tc.steps, progress)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: KeepsDone = %v, want %q", tc.name, err, tc.want)
		}
	}
}

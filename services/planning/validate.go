package planning

import (
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// normalise validates proposed steps (plan.Check) and returns trimmed copies, their
// dependencies deduplicated, in a stable topological order. field names the steps in an
// INVALID_INPUT error: "proposed_steps" of a request, "steps" of the planning model's plan.
func normalise(
	field string, proposed []*typev1.Step, tools map[string]*typev1.Tool, limit int,
) ([]*typev1.Step, error) {
	steps := make([]*typev1.Step, len(proposed))
	seen := map[string]bool{} // a step's dependencies so far: a step may have a thousand
	for i, p := range proposed {
		id := strings.TrimSpace(p.GetId())
		if id == "" {
			return nil, stageerr.Invalid("%s[%d].id must not be empty", field, i)
		}
		steps[i] = &typev1.Step{
			Id:          id,
			Description: strings.TrimSpace(p.GetDescription()),
			ToolName:    strings.TrimSpace(p.GetToolName()),
		}
		clear(seen)
		for _, d := range p.GetDependsOn() {
			if dep := strings.TrimSpace(d); !seen[dep] {
				seen[dep] = true
				steps[i].DependsOn = append(steps[i].DependsOn, dep)
			}
		}
	}
	if err := plan.Check(steps, tools, limit); err != nil {
		if se := stageerr.As(err); se != nil &&
			se.Code == typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT {
			se.Msg = field + ": " + se.Msg
		}
		return nil, err
	}
	return plan.Sort(steps), nil
}

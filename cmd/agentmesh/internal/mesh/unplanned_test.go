package mesh_test

import (
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestUnplannedStepIDIsNew: a call of a tool no step uses joins the plan as a step whose id
// no step of the plan has, though the planning model named a step "unplanned-1": the two
// steps had one id, and a revision of the plan would be refused for it.
func TestUnplannedStepIDIsNew(t *testing.T) {
	const message = "What time is it in Tokyo?"
	cfg := config.Default()
	cfg.Defaults.MaxReplans = 0
	h := startWith(t, cfg, withPlanner,
		planner(message, submitPlan(`{"viable": true, "steps": [
			{"id": "unplanned-1", "description": "read the clock", "tool": "current_time"}]}`)),
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
			calcTurn("c1", "9/3"), // leaves the plan
			text("It is late in Tokyo."),
		}})
	res := h.run(t, &agentv1.RunRequest{Message: message})
	checkInvariants(t, res)
	seen := map[string]bool{}
	for _, p := range res.GetPlan() {
		id := p.GetStep().GetId()
		if seen[id] {
			t.Errorf("two steps have the id %q: %v", id, res.GetPlan())
		}
		seen[id] = true
	}
	if len(res.GetPlan()) != 2 {
		t.Errorf("plan %v, want the model's step and the calculator's", res.GetPlan())
	}
}

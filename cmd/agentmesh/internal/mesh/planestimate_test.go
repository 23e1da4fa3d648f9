package mesh_test

import (
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc"
)

// TestOutOfContractEstimatedSteps: a replacement planning stage's plan estimating a negative
// number of turns is outside the planning contract: the run ends before any turn as
// FAILED_PREFLIGHT STAGE_CONTRACT_VIOLATION saying so, where it ran on with a plan "estimated
// -1 turns"; an estimate of 0 is taken.
func TestOutOfContractEstimatedSteps(t *testing.T) {
	planner := &replacementPlanner{}
	steps := []*typev1.Step{{Id: "a", Description: "multiply", ToolName: "calculator"}}
	planner.steps.Store(&steps)
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{mesh.Planning: serveStage(t, mesh.Planning, func(g *grpc.Server) {
			planningv1.RegisterPlanningServiceServer(g, planner)
		})}
	})
	negative, zero := int32(-1), int32(0)
	planner.estimated.Store(&negative)
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	preflightViolation(t, res, "the planning stage answered outside its contract: "+
		"estimated_steps -1 is negative")

	planner.estimated.Store(&zero)
	res = h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	if !res.GetSuccess() || !strings.Contains(res.GetFinalReport().GetContent(), "42") {
		t.Fatalf("%s %s (%s): %q, want a completed run answering 42", res.GetOutcome(),
			res.GetExitReason(), res.GetError().GetMessage(), res.GetFinalReport().GetContent())
	}
}

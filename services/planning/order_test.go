package planning_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/services/planning"
)

// TestLongProposedPlanIsOrdered: proposed steps listed last-first (each depends on the next)
// come back in executable order. A request may raise max_steps to plan.MaxStepsLimit, and the
// order took time quadratic in the steps: 40 000 of them, 600 KB, kept the stage busy for a
// minute and a half. The deadline is far more than ordering them takes.
func TestLongProposedPlanIsOrdered(t *testing.T) {
	const n = plan.MaxStepsLimit
	steps := make([]*typev1.Step, n)
	for i := range steps {
		steps[i] = &typev1.Step{Id: fmt.Sprint("s", i), Description: "step"}
		if i < n-1 {
			steps[i].DependsOn = []string{fmt.Sprint("s", i+1)}
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := client(t, planning.Options{}).Plan(ctx,
		&planningv1.PlanRequest{Goal: "g", MaxSteps: n, ProposedSteps: steps})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetSteps()
	if len(got) != n || got[0].GetId() != fmt.Sprint("s", n-1) || got[n-1].GetId() != "s0" {
		t.Fatalf("%d steps from %s to %s, want %d from s%d to s0", len(got),
			got[0].GetId(), got[len(got)-1].GetId(), n, n-1)
	}
}

package mesh_test

import (
	"fmt"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/plan"
)

// TestReplanAfterALongToolError: a tool's error of any length (here current_time's, which
// quotes a zone of 70 KiB) is cut in the middle to a step's note (plan.MaxNoteBytes), and the
// reason to revise to plan.MaxReasonBytes, so that the planning stage takes the revision and
// the model's prompt stays small; the cut keeps the error's start.
func TestReplanAfterALongToolError(t *testing.T) {
	const message = "Check the time on Mars, then calculate 6*7"
	zone := "Mars/" + strings.Repeat("z", 70<<10)
	h := startWith(t, nil, nil, llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
		toolTurn("t1", "current_time", fmt.Sprintf(`{"timezone": %q}`, zone)),
		calcTurn("c1", "6*7"),
		text("No clock knows Mars; 6*7 is 42."),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	_, revised := h.planEvents(t, res.GetRunId())
	if len(revised) != 1 {
		t.Fatalf("plan_revised %d times, want once: %v", len(revised), planEntries(res))
	}
	r := revised[0]
	if n := len(r.GetReason()); n > plan.MaxReasonBytes ||
		!strings.Contains(r.GetReason(), `step step-1 (current_time) failed: unknown timezone "Mars/zz`) {
		t.Errorf("the reason (%d bytes) starts %.200q", n, r.GetReason())
	}
	for _, s := range r.GetSteps() {
		if n := len(s.GetNote()); n > plan.MaxNoteBytes {
			t.Errorf("step %s's note is %d bytes, over %d", s.GetStep().GetId(), n, plan.MaxNoteBytes)
		}
	}
}

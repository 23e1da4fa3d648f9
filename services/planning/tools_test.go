package planning_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/planning"
)

// TestManyToolsAndConstraintsArePlannedQuickly: the rules read a request's negative
// constraints once, not once for each tool. Each tool had every constraint matched and
// lowercased again: 10,000 tools and 1,000 constraints, 300 KB, kept the stage busy for two
// minutes (a request now offers at most planning.MaxTools). The deadline is far more than
// planning takes.
func TestManyToolsAndConstraintsArePlannedQuickly(t *testing.T) {
	tools := make([]*typev1.Tool, planning.MaxTools)
	for i := range tools {
		tools[i] = &typev1.Tool{Name: fmt.Sprint("tool_", i), Description: fmt.Sprint("does thing ", i)}
	}
	constraints := make([]string, planning.MaxConstraints)
	for i := range constraints {
		constraints[i] = fmt.Sprint("without ", strings.Repeat("z", 100), i)
	}
	constraints[0] = "without tool_7"
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := client(t, planning.Options{}).Plan(ctx, &planningv1.PlanRequest{
		Goal: "run tool 7, then do thing 8", TaskType: "action", Constraints: constraints, AvailableTools: tools})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range resp.GetSteps() {
		if st.GetToolName() == "tool_7" {
			t.Errorf("step %s uses tool_7, which a constraint rules out", st.GetId())
		}
	}
}

// TestLongToolDescriptionIsPlannedQuickly: the rules read a tool's description in time linear
// in its words. Each word was looked up among the distinct stems so far: a description of
// 1 MiB of distinct words (the limit of all descriptions) kept the stage busy for 25 s. The
// deadline is far more than planning takes.
func TestLongToolDescriptionIsPlannedQuickly(t *testing.T) {
	var b strings.Builder
	for i := 0; ; i++ {
		w := fmt.Sprintf("w%dq ", i)
		if b.Len()+len(w) > planning.MaxToolDescriptionsBytes {
			break
		}
		b.WriteString(w)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := client(t, planning.Options{}).Plan(ctx, &planningv1.PlanRequest{
		Goal: "look up w7q", TaskType: "action",
		AvailableTools: []*typev1.Tool{{Name: "lookup", Description: b.String()}}})
	if err != nil {
		t.Fatal(err)
	}
	if tool := resp.GetSteps()[0].GetToolName(); tool != "lookup" {
		t.Errorf("step 1 uses %q, want lookup", tool)
	}
}

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

// TestToolsAtTheLimitsArePlannedQuickly: the rules find the tools a clause's words match
// through an index of the tools' stems. Every clause was matched against every stem of every
// tool: 1,000 clauses and 1,000 tools, with descriptions of 1 MiB in all, kept the stage busy
// for 14 s. The deadline is far more than planning takes.
func TestToolsAtTheLimitsArePlannedQuickly(t *testing.T) {
	tools := make([]*typev1.Tool, planning.MaxTools)
	per := planning.MaxToolDescriptionsBytes / planning.MaxTools
	for i := range tools {
		var b strings.Builder
		for j := 0; ; j++ {
			w := fmt.Sprintf("w%dq%d ", j, i)
			if b.Len()+len(w) > per {
				break
			}
			b.WriteString(w)
		}
		tools[i] = &typev1.Tool{Name: fmt.Sprint("tool_calc_", i), Description: b.String()}
	}
	clauses := make([]string, 1000)
	for i := range clauses {
		clauses[i] = fmt.Sprint("compute 6 times ", i, " with w3q", i)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	resp, err := client(t, planning.Options{}).Plan(ctx, &planningv1.PlanRequest{
		Goal: strings.Join(clauses, "; "), MaxSteps: 1000, TaskType: "action", AvailableTools: tools})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range resp.GetSteps() {
		if want := fmt.Sprint("tool_calc_", i); st.GetToolName() != want {
			t.Fatalf("step %s uses %q, want %s, whose description has w3q%d", st.GetId(),
				st.GetToolName(), want, i)
		}
	}
}

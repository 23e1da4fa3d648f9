package planning_test

import (
	"fmt"
	"strings"
	"testing"

	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/planning"
)

// TestManyToolsAndConstraintsArePlannedQuickly: the rules read a request's negative
// constraints once, not once for each tool. Each tool had every constraint matched and
// lowercased again: 10,000 tools and 1,000 constraints, 300 KB, kept the stage busy for two
// minutes (a request now offers at most planning.MaxTools). BenchmarkPlanAtTheLimits measures
// how the cost grows.
func TestManyToolsAndConstraintsArePlanned(t *testing.T) {
	tools := make([]*typev1.Tool, planning.MaxTools)
	for i := range tools {
		tools[i] = &typev1.Tool{Name: fmt.Sprint("tool_", i), Description: fmt.Sprint("does thing ", i)}
	}
	constraints := make([]string, planning.MaxConstraints)
	for i := range constraints {
		constraints[i] = fmt.Sprint("without ", strings.Repeat("z", 100), i)
	}
	constraints[0] = "without tool_7"
	resp, err := client(t, planning.Options{}).Plan(t.Context(), &planningv1.PlanRequest{
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

// TestLongToolDescriptionIsPlanned: the rules read a tool's description in time linear in its
// words. Each word was looked up among the distinct stems so far: a description of 1 MiB of
// distinct words (the limit of all descriptions) kept the stage busy for 25 s.
// BenchmarkPlanAtTheLimits measures how the cost grows.
func TestLongToolDescriptionIsPlanned(t *testing.T) {
	resp, err := client(t, planning.Options{}).Plan(t.Context(),
		longDescriptionRequest(planning.MaxToolDescriptionsBytes))
	if err != nil {
		t.Fatal(err)
	}
	if tool := resp.GetSteps()[0].GetToolName(); tool != "lookup" {
		t.Errorf("step 1 uses %q, want lookup", tool)
	}
}

// longDescriptionRequest asks for a plan of one tool whose description is size bytes of
// distinct words, w0q to wNq, to look up w7q.
func longDescriptionRequest(size int) *planningv1.PlanRequest {
	var b strings.Builder
	for i := 0; ; i++ {
		w := fmt.Sprintf("w%dq ", i)
		if b.Len()+len(w) > size {
			break
		}
		b.WriteString(w)
	}
	return &planningv1.PlanRequest{Goal: "look up w7q", TaskType: "action",
		AvailableTools: []*typev1.Tool{{Name: "lookup", Description: b.String()}}}
}

// TestToolsAtTheLimitsArePlanned: the rules find the tools a clause's words match through an
// index of the tools' stems. Every clause was matched against every stem of every tool: 1,000
// clauses and 1,000 tools, with descriptions of 1 MiB in all, kept the stage busy for 14 s.
// BenchmarkPlanAtTheLimits measures how the cost grows.
func TestToolsAtTheLimitsArePlanned(t *testing.T) {
	resp, err := client(t, planning.Options{}).Plan(t.Context(), toolsRequest(planning.MaxTools))
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

// toolsRequest asks for a plan of n clauses over n tools, each with a description of a
// thousandth of planning.MaxToolDescriptionsBytes, clause i naming a word of tool i's.
func toolsRequest(n int) *planningv1.PlanRequest {
	tools := make([]*typev1.Tool, n)
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
	clauses := make([]string, n)
	for i := range clauses {
		clauses[i] = fmt.Sprint("compute 6 times ", i, " with w3q", i)
	}
	return &planningv1.PlanRequest{Goal: strings.Join(clauses, "; "), MaxSteps: int32(n),
		TaskType: "action", AvailableTools: tools}
}

// BenchmarkPlanAtTheLimits is the rules' plan of requests a tenth of the limits and at them:
// n clauses over n tools (toolsRequest), and a description of n KiB of distinct words
// (longDescriptionRequest). The rules are linear in both, so the larger costs about ten times
// the smaller (it cost a hundred times, and seconds, before the stems' index and the linear
// stemming). Compare them with benchstat's ratio, not a timing assertion.
func BenchmarkPlanAtTheLimits(b *testing.B) {
	svc := planning.New(planning.Options{})
	for _, n := range []int{planning.MaxTools / 10, planning.MaxTools} {
		for _, c := range []struct {
			name string
			req  *planningv1.PlanRequest
		}{
			{"tools", toolsRequest(n)},
			{"description", longDescriptionRequest(n * planning.MaxToolDescriptionsBytes / planning.MaxTools)},
		} {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				for b.Loop() {
					if _, err := svc.Plan(b.Context(), c.req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

package orchestrator

import (
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"google.golang.org/protobuf/types/known/structpb"
)

// countingCounter is a tokens.Counter that counts the tools it was asked to count.
type countingCounter struct {
	tokens.Counter
	tools int
}

func (c *countingCounter) Tools(tools []*typev1.Tool) int64 {
	c.tools += len(tools)
	return c.Counter.Tools(tools)
}

// TestSchemaTokensCountsEachToolOnce: a run's schema tokens are its counter's, and each tool
// is counted once however often the run asks (before every turn, after every tool result).
func TestSchemaTokensCountsEachToolOnce(t *testing.T) {
	schema, err := structpb.NewStruct(map[string]any{
		"type":       "object",
		"properties": map[string]any{"expression": map[string]any{"type": "string", "description": "what to compute"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	calc := &typev1.Tool{Name: "calculator", Description: "computes", InputSchema: schema}
	report := &typev1.Tool{Name: FinalReportTool, Description: "ends the run"}
	counter := &countingCounter{Counter: tokens.Estimator}
	r := &run{counter: counter}

	want := tokens.Estimator.Tools([]*typev1.Tool{calc, report})
	for turn := range 5 {
		if got := r.schemaTokens([]*typev1.Tool{calc, report}); got != want {
			t.Fatalf("turn %d: schema tokens %d, want %d", turn, got, want)
		}
	}
	if got, want := r.schemaTokens([]*typev1.Tool{report}), tokens.Estimator.Tools([]*typev1.Tool{report}); got != want {
		t.Errorf("final turn: schema tokens %d, want %d", got, want)
	}
	if r.schemaTokens(nil) != 0 {
		t.Error("no tools cost tokens")
	}
	if counter.tools != 2 {
		t.Errorf("the counter counted %d tools, want each of the 2 once", counter.tools)
	}
}

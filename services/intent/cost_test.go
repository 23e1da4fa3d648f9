package intent_test

import (
	"fmt"
	"strings"
	"testing"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/services/intent"
)

// BenchmarkParseManyTools is the rules' parse of the largest message the public API takes,
// naming each of the run's tools again and again after "no" and "with", with one tool and with
// a hundred: the tools should make it cost little more. Each tool's patterns were matched all
// through the message, so that with 100 tools it took ten times as long as with one (seconds
// with 300 tools); they are matched only where the message names the tool after such a word.
// Compare the two with benchstat's ratio, not a timing assertion.
func BenchmarkParseManyTools(b *testing.B) {
	svc := intent.New(intent.Options{})
	var tools []string
	for i := range 100 {
		tools = append(tools, fmt.Sprintf("mcp__tool_%03d", i))
	}
	var msg strings.Builder
	for i := 0; msg.Len() < intent.DefaultMaxMessageBytes-100; i++ {
		fmt.Fprintf(&msg, "no %[1]sx,with %[1]sx,", tools[i%len(tools)])
	}
	for _, n := range []int{1, len(tools)} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			req := &intentv1.ParseRequest{Message: msg.String(), AvailableTools: tools[:n]}
			for b.Loop() {
				resp, err := svc.Parse(b.Context(), req)
				if err != nil {
					b.Fatal(err)
				}
				if len(resp.GetConstraints()) != 0 {
					b.Fatalf("constraints %.3q…, want none: no tool is named whole",
						resp.GetConstraints())
				}
			}
		})
	}
}

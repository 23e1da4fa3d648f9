package intent_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/services/intent"
)

// TestManyToolsCost: the tools of a run make its message cost little more to parse, however
// many of them it names. Each tool's patterns were matched all through the message (those of
// "no <tool>", and of "with <tool>" in a clause that is not a question), so that a 64 KiB
// message naming each of a mesh's 100 tools again and again took ten times as long to parse
// as with one tool (seconds with 300 tools). It now matches them only where the message names
// the tool after such a word. Timing is compared, not measured: the best of two parses with
// the tools against the best with one.
func TestManyToolsCost(t *testing.T) {
	c := client(t, intent.Options{})
	var tools []string
	for i := range 100 {
		tools = append(tools, fmt.Sprintf("mcp__tool_%03d", i))
	}
	var b strings.Builder
	for i := 0; b.Len() < intent.DefaultMaxMessageBytes-100; i++ {
		fmt.Fprintf(&b, "no %[1]sx,with %[1]sx,", tools[i%len(tools)])
	}
	msg := b.String()
	parse := func(tools []string) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 2 {
			start := time.Now()
			req := &intentv1.ParseRequest{Message: msg, AvailableTools: tools}
			resp, err := c.Parse(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetConstraints()) != 0 {
				t.Fatalf("constraints %.3q…, want none: no tool is named whole",
					resp.GetConstraints())
			}
			best = min(best, time.Since(start))
		}
		return best
	}
	one, all := parse(tools[:1]), parse(tools)
	t.Logf("one tool %v, %d tools %v", one, len(tools), all)
	if all > 4*one {
		t.Errorf("parsing with %d tools took %v, with one %v: more than 4 times as long",
			len(tools), all, one)
	}
}

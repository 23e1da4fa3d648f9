package mesh_test

import (
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestRefusedCallsAreClosedByToolRefused: a call the run refuses without running it (here an
// unknown tool, and a call over max_tool_calls_total) is closed by a tool_refused event with
// its reason, in call order among the turn's tool events and before the next turn's
// llm_response, and never by tool_started. Before, such a call had no event at all: a client
// showing the calls of llm_response could not close it, nor say why it did not run.
func TestRefusedCallsAreClosedByToolRefused(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "refused", Match: "try three calls", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{
			{ID: "u", Name: "no_such_tool", Arguments: `{}`},
			{ID: "a", Name: "calculator", Arguments: `{"expression":"1+1"}`},
			{ID: "b", Name: "calculator", Arguments: `{"expression":"2+2"}`},
		}},
		text("1+1 is 2."),
	}})
	stream, err := h.client.StreamRun(t.Context(), &agentv1.RunRequest{Message: "try three calls",
		Overrides: &agentv1.RunOverrides{MaxToolCallsTotal: i32(1)}})
	if err != nil {
		t.Fatal(err)
	}
	evs := received(t, stream)
	if len(evs) == 0 || evs[len(evs)-1].GetRunFinished() == nil {
		t.Fatalf("StreamRun ended without run_finished after %d events", len(evs))
	}
	// The turn's tool events in order, each as kind:call id, up to the next turn's answer.
	var (
		got     []string
		refused = map[string]*eventv1.ToolRefused{}
		answers int
	)
	for _, ev := range evs {
		if ev.GetLlmResponse() != nil {
			if answers++; answers == 2 {
				break
			}
		}
		switch k := events.Kind(ev); k {
		case "tool_started":
			got = append(got, k+":"+ev.GetToolStarted().GetCall().GetId())
		case "tool_finished":
			got = append(got, k+":"+ev.GetToolFinished().GetCallId())
		case "tool_refused":
			r := ev.GetToolRefused()
			got = append(got, k+":"+r.GetCallId())
			refused[r.GetCallId()] = r
		}
	}
	want := "tool_refused:u tool_started:a tool_finished:a tool_refused:b"
	if strings.Join(got, " ") != want {
		t.Fatalf("turn 1's tool events %v, want %s", got, want)
	}
	for id, w := range map[string]struct{ tool, reason string }{
		"u": {"no_such_tool", `unknown tool "no_such_tool"; available tools: `},
		"b": {"calculator", "dropped: the run's budget of 1 tool calls is used up"},
	} {
		r := refused[id]
		if r.GetTurn() != 1 || r.GetToolName() != w.tool || !strings.HasPrefix(r.GetReason(), w.reason) {
			t.Errorf("tool_refused of call %s: %v, want turn 1, tool %s, reason %q…", id, r, w.tool, w.reason)
		}
	}
	res := evs[len(evs)-1].GetRunFinished().GetResult()
	if got := toolMessage(t, res, 0); got != "(tool failed: "+refused["u"].GetReason()+")" {
		t.Errorf("the unknown tool's tool message %q does not give the event's reason", got)
	}
	checkEvents(t, h, res)
}

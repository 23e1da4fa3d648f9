package generation_test

import (
	"encoding/json"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestAnthropicReasoningStateContinuesOnAFreshProvider proves that the signed thinking
// blocks survive in reasoning_state alone: a provider that never saw the first answer (as
// after a restart, or on another replica) continues the tool use when the assistant message
// carries the state, and llmtest, like the API, rejects the continuation without it.
func TestAnthropicReasoningStateContinuesOnAFreshProvider(t *testing.T) {
	const thought = "Paris first, then the answer."
	budget := 2048
	for _, stream := range []bool{false, true} {
		first := llmtest.New(t, llmtest.Scenario{Match: "weather in Paris", Turns: []llmtest.Turn{{
			Reasoning: thought,
			ToolCalls: []llmtest.ToolCall{{ID: "toolu_p", Name: "get_weather", Arguments: `{"city": "Paris"}`}},
		}}})
		req := request("anthropic", "claude-test", user("weather in Paris"))
		req.Tools = []*typev1.Tool{tool("get_weather", "city")}
		req.Sampling = &generationv1.Sampling{MaxOutputTokens: 4096, ReasoningEffort: "2048"}
		var resp *generationv1.GenerateResponse
		var err error
		if stream {
			_, resp, err = streamAll(t, anthropicClient(t, first, nil), req)
		} else {
			resp, err = anthropicClient(t, first, nil).Generate(t.Context(), req)
		}
		if err != nil {
			t.Fatal(err)
		}
		var state struct {
			Blocks []struct{ Type, Thinking, Signature string } `json:"anthropic_thinking"`
		}
		if err := json.Unmarshal(resp.GetReasoningState(), &state); err != nil || len(state.Blocks) != 1 ||
			state.Blocks[0].Type != "thinking" || state.Blocks[0].Thinking != thought || state.Blocks[0].Signature != llmtest.Sign(thought) {
			t.Fatalf("stream %v: reasoning_state %q (%v) must carry the signed thinking block", stream, resp.GetReasoningState(), err)
		}

		for _, tc := range []struct {
			name  string
			state []byte
			want  string // "" for success, else the rejection
		}{
			{name: "with the state", state: resp.GetReasoningState()},
			{name: "without it", want: "Expected `thinking` or `redacted_thinking`, but found `tool_use`"},
			{name: "with another provider's state", state: []byte(`{"encrypted_reasoning":"x"}`), want: "Expected `thinking`"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				next := proto.CloneOf(req)
				next.Messages = append(next.Messages,
					&typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Reasoning: resp.GetReasoning(), ToolCalls: resp.GetToolCalls(), ReasoningState: tc.state},
					toolResult("toolu_p", "get_weather", "sunny"))
				var tb testing.TB = t
				if tc.want != "" {
					tb = &discardTB{TB: t} // llmtest reports the rejection it answers
				}
				srv := llmtest.New(tb, llmtest.Scenario{Match: "weather in Paris", Turns: []llmtest.Turn{
					{}, {Content: "Sunny in Paris.", Expect: &llmtest.Expect{ThinkingBudget: &budget}},
				}})
				fresh := serveProviders(t, map[string]generation.Provider{"anthropic": anthropicAt(t, srv.URL(), nil)})
				got, err := fresh.Generate(t.Context(), next)
				if tc.want != "" {
					if se := stageError(t, err, codes.InvalidArgument); !strings.Contains(se.Msg, tc.want) {
						t.Errorf("error %q, want %q", se.Msg, tc.want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got.GetContent() != "Sunny in Paris." {
					t.Errorf("answer = %v", got)
				}
				asst := srv.Requests()[0].Messages[1].Blocks
				if len(asst) != 2 || asst[0].Type != "thinking" || asst[0].Thinking != thought || asst[0].Signature != llmtest.Sign(thought) ||
					asst[1].Type != "tool_use" || asst[1].ID != "toolu_p" {
					t.Errorf("assistant blocks = %+v; the state's signed block must come first", asst)
				}
			})
		}
	}
}

func TestReasoningStateIsAnthropicOnly(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Reasoning: "thought", Content: "ok"}}})
	resp, err := openAIClient(t, srv, nil).Generate(t.Context(), request("openai", "gpt-test", user("x")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetReasoning() != "thought" || resp.GetReasoningState() != nil {
		t.Errorf("reasoning %q, reasoning_state %q: OpenAI answers carry no state", resp.GetReasoning(), resp.GetReasoningState())
	}
}

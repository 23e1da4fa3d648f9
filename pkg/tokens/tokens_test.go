package tokens_test

import (
	"math"
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestEstimate(t *testing.T) {
	table := []struct {
		text string
		want int64
	}{
		{"", 0},
		{"a", 1},
		{"abc", 1},
		{"abcd", 1},
		{"abcde", 2},
		{strings.Repeat("x", 400), 100},
		{strings.Repeat("x", 401), 101},
		{"é", 1},   // 2 bytes
		{"日本語", 3}, // 9 bytes
		// A character of three bytes (CJK, Indic scripts) costs a token, one of four (an
		// emoji) two: at a token per four bytes, Chinese text counted about half of what
		// cl100k_base counts (o200k_base 14, cl100k_base 25), emoji half of cl100k_base's 14.
		{"敏捷的棕色狐狸跳过了懒狗。", 13},
		{"🚀🎉👍🔥😀", 10},
		{"Deploy 🚀 the 服务 now", 8}, // 16 ASCII bytes, a rocket, two Chinese characters
		{"Café crème", 3},          // 12 bytes: two of two bytes count as four ASCII bytes
	}
	for _, tc := range table {
		if got := tokens.Estimate(tc.text); got != tc.want {
			t.Errorf("Estimate(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMessage(t *testing.T) {
	table := []struct {
		name string
		msg  *typev1.Message
		want int64
	}{
		{"nil", nil, 0},
		{"empty", &typev1.Message{Role: typev1.Role_ROLE_USER}, 4},
		{"content", &typev1.Message{Role: typev1.Role_ROLE_USER, Content: strings.Repeat("x", 40)}, 4 + 10},
		{"content and reasoning", &typev1.Message{Content: "abcd", Reasoning: "abcde"}, 4 + 1 + 2},
		{"tool call with raw arguments", &typev1.Message{
			Role: typev1.Role_ROLE_ASSISTANT,
			ToolCalls: []*typev1.ToolCall{
				{Id: "call-id", Name: "search", RawArguments: `{"q":"go"}`},
			},
		}, 4 + 2 + 2 + 3},
		// The provider receives the result's call id and tool name too.
		{"tool result", &typev1.Message{
			Role: typev1.Role_ROLE_TOOL, ToolCallId: "call-id", Name: "search", Content: "abcd",
		}, 4 + 2 + 2 + 1},
		{"tool call with parsed arguments only", &typev1.Message{
			ToolCalls: []*typev1.ToolCall{{Name: "fs__read", Arguments: mustStruct(t, map[string]any{"path": "/a"})}},
		}, 4 + 2 + 4}, // {"path":"/a"} is 13 bytes
		{"two tool calls", &typev1.Message{
			ToolCalls: []*typev1.ToolCall{{Name: "abcd", RawArguments: "{}"}, {Name: "abcd", RawArguments: "{}"}},
		}, 4 + 2*(1+1)},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			if got := tokens.Message(tc.msg); got != tc.want {
				t.Errorf("Message = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	msgs := []*typev1.Message{
		{Content: "abcd"},
		{Content: strings.Repeat("y", 9)},
	}
	if got, want := tokens.Messages(msgs), int64((4+1)+(4+3)); got != want {
		t.Errorf("Messages = %d, want %d", got, want)
	}
	if got := tokens.Messages(nil); got != 0 {
		t.Errorf("Messages(nil) = %d, want 0", got)
	}
}

func TestTools(t *testing.T) {
	schema := mustStruct(t, map[string]any{"type": "object", "b": 1, "a": true})
	// {"a":true,"b":1,"type":"object"} is 32 bytes: keys are sorted, so the count is stable.
	table := []struct {
		name  string
		tools []*typev1.Tool
		want  int64
	}{
		{"none", nil, 0},
		{"name only", []*typev1.Tool{{Name: "abcdefgh"}}, 2},
		{"name, description, schema", []*typev1.Tool{{Name: "abcd", Description: "abcde", InputSchema: schema}}, 1 + 2 + 8},
		{"two tools add up", []*typev1.Tool{{Name: "abcd"}, {Name: "abcd", InputSchema: schema}}, 1 + 1 + 8},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			if got := tokens.Tools(tc.tools); got != tc.want {
				t.Errorf("Tools = %d, want %d", got, tc.want)
			}
		})
	}
}

// A schema JSON cannot encode (NaN) is still counted, from its text form.
func TestToolsUnencodableSchema(t *testing.T) {
	tool := &typev1.Tool{Name: "abcd", InputSchema: &structpb.Struct{
		Fields: map[string]*structpb.Value{"x": structpb.NewNumberValue(math.NaN())},
	}}
	if got := tokens.Tools([]*typev1.Tool{tool}); got <= tokens.Estimate("abcd") {
		t.Errorf("Tools = %d, want the schema counted on top of the name", got)
	}
}

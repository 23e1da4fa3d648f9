package generation_test

import (
	"math"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestRulesAnswers(t *testing.T) {
	client := rulesClient(t)
	type call struct {
		name string
		args map[string]any
	}
	for _, tc := range []struct {
		name     string
		msgs     []*typev1.Message
		tools    []string
		call     *call
		contains []string // for text answers
	}{
		{
			name: "greeting", msgs: []*typev1.Message{user("Hello!")}, tools: []string{"calculator"},
			contains: []string{"Hello", "agentmesh's built-in rules model"},
		},
		{
			name: "arithmetic in words", msgs: []*typev1.Message{user("What is 6 times 7?")}, tools: []string{"calculator", "current_time"},
			call: &call{"calculator", map[string]any{"expression": "6*7"}},
		},
		{
			name: "arithmetic with parentheses", msgs: []*typev1.Message{user("calculate (2+3)*4")}, tools: []string{"calculator"},
			call: &call{"calculator", map[string]any{"expression": "(2+3)*4"}},
		},
		{
			name: "spoken operators", msgs: []*typev1.Message{user("what's 10 divided by 4 plus 3 multiplied by 2.5")}, tools: []string{"calculator"},
			call: &call{"calculator", map[string]any{"expression": "10/4+3*2.5"}},
		},
		{
			name: "thousands separators", msgs: []*typev1.Message{user("What is 1,000 plus 2,500?")}, tools: []string{"calculator"},
			call: &call{"calculator", map[string]any{"expression": "1000+2500"}},
		},
		{
			name: "millions", msgs: []*typev1.Message{user("what is 1,000,000 divided by 4")}, tools: []string{"calculator"},
			call: &call{"calculator", map[string]any{"expression": "1000000/4"}},
		},
		{
			name: "a date is not arithmetic", msgs: []*typev1.Message{user("What happened on 2024-01-05?")}, tools: []string{"calculator"},
			contains: []string{"can't answer that without an LLM provider"},
		},
		{
			name: "a date with slashes is not a division", msgs: []*typev1.Message{user("Who won the match on 12/05/2024?")}, tools: []string{"calculator"},
			contains: []string{"can't answer that without an LLM provider"},
		},
		{
			name: "arithmetic without calculator falls back", msgs: []*typev1.Message{user("What is 6 times 7?")}, tools: []string{"current_time"},
			contains: []string{"can't answer that without an LLM provider"},
		},
		{
			name: "time", msgs: []*typev1.Message{user("What time is it?")}, tools: []string{"calculator", "current_time"},
			call: &call{"current_time", map[string]any{}},
		},
		{
			name: "date", msgs: []*typev1.Message{user("what's the date today")}, tools: []string{"current_time"},
			call: &call{"current_time", map[string]any{}},
		},
		{
			name: "time without current_time falls back", msgs: []*typev1.Message{user("What time is it?")},
			contains: []string{"built-in rules model"},
		},
		{
			name: "search", msgs: []*typev1.Message{user("Search the docs for retry policy")}, tools: []string{"knowledge_search"},
			call: &call{"knowledge_search", map[string]any{"query": "retry policy"}},
		},
		{
			name: "look up in the documentation", msgs: []*typev1.Message{user("look up rate limits in the documentation?")}, tools: []string{"knowledge_search", "calculator"},
			call: &call{"knowledge_search", map[string]any{"query": "rate limits"}},
		},
		{
			name: "search without knowledge_search falls back", msgs: []*typev1.Message{user("search the docs for retry policy")}, tools: []string{"calculator"},
			contains: []string{"built-in rules model"},
		},
		{
			name: "explicit call with arguments", msgs: []*typev1.Message{user(`call echo {"text": "hi there"}`)}, tools: []string{"echo"},
			call: &call{"echo", map[string]any{"text": "hi there"}},
		},
		{
			name: "explicit call without arguments", msgs: []*typev1.Message{user("please call fs__list_files")}, tools: []string{"fs__list_files"},
			call: &call{"fs__list_files", map[string]any{}},
		},
		{
			name: "explicit call of a tool not offered", msgs: []*typev1.Message{user("call rm_rf {}")}, tools: []string{"echo", "calculator"},
			contains: []string{"can't call rm_rf", "echo, calculator"},
		},
		{
			name:  "tool result is quoted",
			msgs:  []*typev1.Message{user("what is 6 times 7"), assistantCall("call_1", "calculator", `{"expression":"6*7"}`), toolResult("call_1", "", "42")},
			tools: []string{"calculator"}, contains: []string{"calculator returned 42."},
		},
		{
			name: "a knowledge search that found nothing is refused",
			msgs: []*typev1.Message{
				user("search the docs for staking"), assistantCall("call_1", "knowledge_search", `{"query":"staking"}`),
				toolResult("call_1", "knowledge_search", "DOCUMENTATION_SEARCH_RESULT: EMPTY"),
			},
			tools: []string{"knowledge_search"}, contains: []string{"I don't have enough information in the current documentation to answer that."},
		},
		{
			name: "several tool results",
			msgs: []*typev1.Message{
				user("x"),
				{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{{Id: "a", Name: "current_time"}, {Id: "b", Name: "calculator"}}},
				toolResult("a", "current_time", "2026-01-19T10:00:00Z"), toolResult("b", "calculator", "Result: 4!"),
			},
			contains: []string{"current_time returned 2026-01-19T10:00:00Z.\ncalculator returned Result: 4!"},
		},
		{
			name: "fallback explains how to configure a provider", msgs: []*typev1.Message{system("You are helpful."), user("Write me a poem about the sea")},
			contains: []string{"built-in rules model", "LLM provider", "agentmesh.yaml", "providers:", "targets:"},
		},
		{
			name: "final_report only wraps the text answer", msgs: []*typev1.Message{user("hello")}, tools: []string{"final_report"},
			call: &call{"final_report", map[string]any{"report_format": "text", "report_content": generationRulesGreeting(t)}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request("rules", "rules-v1", tc.msgs...)
			req.Tools = tools(tc.tools...)
			resp, err := client.Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetProvider() != "rules" || resp.GetModel() != "rules-v1" || resp.GetUsage().GetInput() == 0 || resp.GetUsage().GetOutput() == 0 {
				t.Errorf("provider %q model %q usage %v", resp.GetProvider(), resp.GetModel(), resp.GetUsage())
			}
			if tc.call == nil {
				if resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_MESSAGE || len(resp.GetToolCalls()) != 0 || resp.GetStopReason() != "stop" {
					t.Fatalf("want a text answer, got %v", resp)
				}
				for _, want := range tc.contains {
					if !strings.Contains(resp.GetContent(), want) {
						t.Errorf("content %q lacks %q", resp.GetContent(), want)
					}
				}
				return
			}
			if resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL || len(resp.GetToolCalls()) != 1 ||
				resp.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE {
				t.Fatalf("want one native tool call, got %v", resp)
			}
			got := resp.GetToolCalls()[0]
			want, _ := structpb.NewStruct(tc.call.args)
			if got.GetName() != tc.call.name || !proto.Equal(got.GetArguments(), want) || got.GetId() != "call_1" {
				t.Errorf("call = %s %v (id %s), want %s %v", got.GetName(), got.GetArguments(), got.GetId(), tc.call.name, tc.call.args)
			}
		})
	}
}

func TestRulesCallIDsFollowTheConversation(t *testing.T) {
	req := request("rules", "rules-v1",
		user("first"), assistantCall("call_1", "calculator", `{}`), toolResult("call_1", "calculator", "1"),
		assistantCall("call_2", "calculator", `{}`), toolResult("call_2", "calculator", "2"),
		user("now what is 1 plus 1"))
	req.Tools = tools("calculator")
	resp, err := rulesClient(t).Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if id := resp.GetToolCalls()[0].GetId(); id != "call_3" {
		t.Errorf("id = %q, want call_3", id)
	}
}

func TestRulesFinalReportUsesTheOfferedSchema(t *testing.T) {
	schema, _ := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{
		"format": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"},
	}})
	req := request("rules", "rules-v1", user("x"), assistantCall("call_1", "lookup", `{}`), toolResult("call_1", "lookup", "the answer"))
	req.Tools = []*typev1.Tool{{Name: "final_report", InputSchema: schema}}
	resp, err := rulesClient(t).Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := args(resp.GetToolCalls()[0])
	if got["format"] != "text" || got["content"] != "lookup returned the answer." || len(got) != 2 {
		t.Errorf("final_report arguments = %v", got)
	}
}

func TestRulesTruncatesLongToolResults(t *testing.T) {
	long := strings.Repeat("lorem ipsum dolor ", 200)
	req := request("rules", "rules-v1", user("x"), assistantCall("c", "fetch", `{}`), toolResult("c", "fetch", long))
	resp, err := rulesClient(t).Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	content := resp.GetContent()
	if !strings.HasPrefix(content, "fetch returned:\nlorem ipsum") || !strings.HasSuffix(content, "…") || len(content) > 1600 {
		t.Errorf("content (%d bytes) = %q…", len(content), content[:min(80, len(content))])
	}
	words := strings.Fields(strings.TrimSuffix(content, "…"))
	if last := words[len(words)-1]; last != "lorem" && last != "ipsum" && last != "dolor" {
		t.Errorf("the cut must fall on a word boundary, last word %q", last)
	}
}

func TestRulesStream(t *testing.T) {
	client := rulesClient(t)
	deltas, final, err := streamAll(t, client, request("rules", "rules-v1", user("Write me a poem")))
	if err != nil {
		t.Fatal(err)
	}
	content, _, parts := joinDeltas(deltas)
	if content != final.GetContent() || parts != len(strings.Fields(content)) || parts < 10 {
		t.Errorf("%d word deltas joined to %q; final %q", parts, content, final.GetContent())
	}

	req := request("rules", "rules-v1", user("what is 2 plus 2"))
	req.Tools = tools("calculator")
	deltas, final, err = streamAll(t, client, req)
	if err != nil {
		t.Fatal(err)
	}
	call := final.GetToolCalls()[0]
	if len(deltas) != 1 || call.GetName() != "calculator" || !proto.Equal(deltas[0].GetToolCall(),
		&generationv1.ToolCallDelta{Index: 0, Id: call.GetId(), Name: "calculator", Arguments: call.GetRawArguments()}) {
		t.Errorf("a tool call streams as one fragment: deltas %v, final %v", deltas, final)
	}
}

func TestRulesEmbed(t *testing.T) {
	client := rulesClient(t)
	texts := []string{
		"How do I configure the retry policy for tools?",
		"configure tool retry policy",
		"The weather in Paris is sunny today",
		"",
	}
	resp, err := client.Embed(t.Context(), &generationv1.EmbedRequest{
		Target: &typev1.Target{Provider: "rules", Model: "hash-64"}, Inputs: texts,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetModel() != "hash-64" || len(resp.GetEmbeddings()) != len(texts) || resp.GetUsage().GetInput() == 0 {
		t.Fatalf("response = %v", resp)
	}
	vecs := make([][]float32, len(texts))
	for i, e := range resp.GetEmbeddings() {
		vecs[i] = e.GetValues()
		if len(vecs[i]) != generation.RulesEmbeddingDims {
			t.Fatalf("vector %d has %d dims", i, len(vecs[i]))
		}
	}
	for i := range 3 {
		if n := cosine(vecs[i], vecs[i]); math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d is not unit length: %v", i, n)
		}
	}
	similar, unrelated := cosine(vecs[0], vecs[1]), cosine(vecs[0], vecs[2])
	if similar < 0.7 || similar <= unrelated+0.4 {
		t.Errorf("similar texts score %.2f, unrelated %.2f", similar, unrelated)
	}
	if cosine(vecs[3], vecs[3]) != 0 {
		t.Error("an empty text must give the zero vector")
	}

	again, err := client.Embed(t.Context(), &generationv1.EmbedRequest{
		Target: &typev1.Target{Provider: "rules", Model: "hash-64"}, Inputs: texts[:1],
	})
	if err != nil || cosine(again.GetEmbeddings()[0].GetValues(), vecs[0]) < 0.99999 {
		t.Errorf("embeddings are not deterministic: %v", err)
	}
}

func cosine(a, b []float32) float64 {
	var dot float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
	}
	return dot
}

// generationRulesGreeting asks the rules provider for its greeting, to compare with what it
// puts in final_report.
func generationRulesGreeting(t *testing.T) string {
	t.Helper()
	resp, err := generation.NewRules().Complete(t.Context(), &generation.Request{Model: "m", Messages: []*typev1.Message{user("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Content
}

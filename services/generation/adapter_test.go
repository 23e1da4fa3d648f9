package generation_test

import (
	"reflect"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestAdapterToolArguments(t *testing.T) {
	const (
		native    = generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE
		recovered = generationv1.AdapterStatus_ADAPTER_STATUS_RECOVERED
		rejected  = generationv1.AdapterStatus_ADAPTER_STATUS_REJECTED
	)
	for _, tc := range []struct {
		name    string
		raw     string
		strict  bool
		status  generationv1.AdapterStatus
		args    map[string]any // nil: the call must have no parsed arguments
		repairs []string       // substrings, in order, of the repair lines
	}{
		{name: "valid", raw: `{"city": "Paris"}`, status: native, args: map[string]any{"city": "Paris"}},
		{name: "empty is the empty object", raw: "", status: native, args: map[string]any{}},
		{
			name: "code fence and trailing comma", raw: "```json\n{\"city\": \"Paris\",}\n```", status: recovered,
			args:    map[string]any{"city": "Paris"},
			repairs: []string{"tool call call_1 (get_weather): stripped a ``` code fence", "removed 1 trailing commas"},
		},
		{
			name: "unclosed braces and string", raw: `{"city": "Par`, status: recovered,
			args:    map[string]any{"city": "Par"},
			repairs: []string{"closed an unterminated string", `appended the missing closers "}"`},
		},
		{
			name: "trailing garbage", raw: `{"city": "Paris"} I hope this helps!`, status: recovered,
			args:    map[string]any{"city": "Paris"},
			repairs: []string{"trimmed 18 bytes of trailing text"},
		},
		{
			name: "leading prose", raw: `Arguments: {"city": "Paris", "days": [1, 2`, status: recovered,
			args:    map[string]any{"city": "Paris", "days": []any{1.0, 2.0}},
			repairs: []string{"dropped 11 bytes of text before", `appended the missing closers "]}"`},
		},
		{
			name: "arguments sent as a JSON string", raw: `"{\"city\": \"Paris\"}"`, status: recovered,
			args: map[string]any{"city": "Paris"}, repairs: []string{"decoded an object sent as a JSON string"},
		},
		{
			name: "single quotes and bare keys", raw: `{city: 'Paris'}`, status: recovered,
			args:    map[string]any{"city": "Paris"},
			repairs: []string{"turned 1 single-quoted strings into double-quoted ones", "quoted 1 bare keys"},
		},
		{
			name: "strict mode does not decode a stringified object", raw: `"{\"city\": \"Paris\"}"`, strict: true, status: rejected,
			repairs: []string{"rejected: arguments are a JSON string, not an object; strict mode allows no repair"},
		},
		{
			name: "strict mode does not repair", raw: `{"city": "Paris",}`, strict: true, status: rejected,
			repairs: []string{"rejected: arguments are not valid JSON", "strict mode allows no repair"},
		},
		{
			name: "strict mode keeps valid arguments", raw: `{"city": "Paris"}`, strict: true, status: native,
			args: map[string]any{"city": "Paris"},
		},
		{
			name: "not JSON at all", raw: `city equals Paris`, status: rejected,
			repairs: []string{"rejected: arguments are not valid JSON", "could not be repaired"},
		},
		{
			name: "an array is not an object", raw: `["Paris"]`, status: rejected,
			repairs: []string{"rejected: arguments are a JSON array, not an object"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
				ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: tc.raw}},
			}}})
			req := request("openai", "gpt-test", user("weather?"))
			req.Tools = tools("get_weather")
			req.StrictMode = tc.strict
			resp, err := openAIClient(t, srv, nil).Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetAdapterStatus() != tc.status || resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL {
				t.Errorf("status %v type %v, want %v TOOL_CALL (repairs %q)", resp.GetAdapterStatus(), resp.GetType(), tc.status, resp.GetRepairs())
			}
			call := resp.GetToolCalls()[0]
			if call.GetRawArguments() != tc.raw || call.GetName() != "get_weather" || call.GetId() != "call_1" {
				t.Errorf("call = %v; the raw arguments must be kept", call)
			}
			switch {
			case tc.args == nil && call.GetArguments() != nil:
				t.Errorf("rejected call has arguments %v", call.GetArguments())
			case tc.args != nil && !reflect.DeepEqual(args(call), tc.args):
				t.Errorf("arguments = %v, want %v", args(call), tc.args)
			}
			joined := strings.Join(resp.GetRepairs(), "\n")
			pos := 0
			for _, want := range tc.repairs {
				i := strings.Index(joined[pos:], want)
				if i < 0 {
					t.Errorf("repairs %q lack %q (in order)", resp.GetRepairs(), want)
					break
				}
				pos += i + len(want)
			}
			if len(tc.repairs) == 0 && len(resp.GetRepairs()) != 0 {
				t.Errorf("repairs = %q, want none", resp.GetRepairs())
			}
		})
	}
}

func TestAdapterKeepsValidCallsBesideARejectedOne(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
		{ID: "a", Name: "get_weather", Arguments: `{"city": "Paris"}`},
		{ID: "b", Name: "get_weather", Arguments: `{{{{`},
		{ID: "c", Name: "", Arguments: `{}`},
	}}}})
	resp, err := openAIClient(t, srv, nil).Generate(t.Context(), request("openai", "gpt-test", user("x")))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.GetToolCalls()
	if resp.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_REJECTED || len(calls) != 3 {
		t.Fatalf("status %v calls %d", resp.GetAdapterStatus(), len(calls))
	}
	if args(calls[0])["city"] != "Paris" || calls[1].GetArguments() != nil || calls[2].GetArguments() != nil {
		t.Errorf("calls = %v", calls)
	}
	joined := strings.Join(resp.GetRepairs(), "\n")
	if !strings.Contains(joined, "tool call b (get_weather): rejected") || !strings.Contains(joined, "tool call c (): rejected: the tool call has no name") {
		t.Errorf("repairs = %q", resp.GetRepairs())
	}
}

// TestAdapterRejectsACallCutOffByTheTokenLimit (issue 11.7): in an answer cut off at the
// output token limit, the last call's unfinished arguments are not repaired into a call the
// model never finished: it is rejected, saying why. Complete calls before it, and a complete
// last call, are kept.
func TestAdapterRejectsACallCutOffByTheTokenLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		strict bool
		last   string
		kept   bool
		stream bool
		finish string
	}{
		{name: "unfinished arguments", last: `{"city": "Ber`, finish: "length"},
		{name: "unfinished arguments, streamed", last: `{"city": "Ber`, finish: "length", stream: true},
		{name: "unfinished arguments, strict", strict: true, last: `{"city": "Ber`, finish: "length"},
		{name: "no arguments yet", last: ``, finish: "length"},
		{name: "complete arguments", last: `{"city": "Bern"}`, finish: "length", kept: true},
		{name: "not cut off: repaired as usual", last: `{"city": "Bern"`, finish: "tool_calls", kept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{FinishReason: tc.finish, ToolCalls: []llmtest.ToolCall{
				{ID: "a", Name: "get_weather", Arguments: `{"city": "Paris"}`},
				{ID: "b", Name: "get_weather", Arguments: tc.last},
			}}}})
			req := request("openai", "gpt-test", user("x"))
			req.StrictMode = tc.strict
			client := openAIClient(t, srv, nil)
			var resp *generationv1.GenerateResponse
			var err error
			if tc.stream {
				_, resp, err = streamAll(t, client, req)
			} else {
				resp, err = client.Generate(t.Context(), req)
			}
			if err != nil {
				t.Fatal(err)
			}
			calls := resp.GetToolCalls()
			if len(calls) != 2 || args(calls[0])["city"] != "Paris" {
				t.Fatalf("calls = %v", calls)
			}
			if kept := calls[1].GetArguments() != nil; kept != tc.kept {
				t.Fatalf("last call kept = %v (%v), want %v", kept, calls[1].GetArguments(), tc.kept)
			}
			joined := strings.Join(resp.GetRepairs(), "\n")
			cutOff := strings.Contains(joined, "tool call b (get_weather): rejected: the arguments were cut off at the output token limit (stop reason length)")
			if cutOff == tc.kept || (!tc.kept && resp.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_REJECTED) {
				t.Errorf("status %v repairs %q", resp.GetAdapterStatus(), resp.GetRepairs())
			}
		})
	}
}

func TestResponseTypes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		turn     llmtest.Turn
		typ      generationv1.ResponseType
		stop     string
		maxToken bool
	}{
		{name: "content is MESSAGE", turn: llmtest.Turn{Content: "hi"}, typ: generationv1.ResponseType_RESPONSE_TYPE_MESSAGE, stop: "stop"},
		{name: "only reasoning is MESSAGE", turn: llmtest.Turn{Reasoning: "thinking..."}, typ: generationv1.ResponseType_RESPONSE_TYPE_MESSAGE, stop: "stop"},
		{name: "nothing is DONE", turn: llmtest.Turn{}, typ: generationv1.ResponseType_RESPONSE_TYPE_DONE, stop: "stop"},
		{name: "cut-off content is kept", turn: llmtest.Turn{Content: "partial", FinishReason: "length"}, typ: generationv1.ResponseType_RESPONSE_TYPE_MESSAGE, stop: "length"},
		{name: "content filter", turn: llmtest.Turn{Content: "", Reasoning: "r", FinishReason: "content_filter"}, typ: generationv1.ResponseType_RESPONSE_TYPE_MESSAGE, stop: "content_filter"},
		{name: "length with nothing is MAX_TOKENS_EXCEEDED", turn: llmtest.Turn{FinishReason: "length"}, maxToken: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{tc.turn}})
			req := request("openai", "gpt-test", user("x"))
			req.Sampling = &generationv1.Sampling{MaxOutputTokens: 16}
			resp, err := openAIClient(t, srv, nil).Generate(t.Context(), req)
			if tc.maxToken {
				se := stageError(t, err, codes.ResourceExhausted)
				if se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED || !strings.Contains(se.Msg, "max_output_tokens 16") {
					t.Errorf("error = %v %q", se.Code, se.Msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetType() != tc.typ || resp.GetStopReason() != tc.stop {
				t.Errorf("type %v stop %q, want %v %q", resp.GetType(), resp.GetStopReason(), tc.typ, tc.stop)
			}
		})
	}
}

func TestAdapterParsesStringifiedFieldsTheSchemaWantsStructured(t *testing.T) {
	schema, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{
		"filters": map[string]any{"type": "object"},
		"query":   map[string]any{"type": "string"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := structpb.NewStruct(map[string]any{"type": "object", "properties": map[string]any{"filters": map[string]any{"type": "string"}}})
	if err != nil {
		t.Fatal(err)
	}
	raw := `{"query": "{\"looks\": \"like JSON\"}", "filters": "{\"year\": 2024}"}`
	for _, tc := range []struct {
		name   string
		strict bool
		status generationv1.AdapterStatus
		args   map[string]any
	}{
		{name: "repaired", status: generationv1.AdapterStatus_ADAPTER_STATUS_RECOVERED,
			args: map[string]any{"query": `{"looks": "like JSON"}`, "filters": map[string]any{"year": 2024.0}}},
		{name: "strict keeps the strings", strict: true, status: generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE,
			args: map[string]any{"query": `{"looks": "like JSON"}`, "filters": `{"year": 2024}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
				ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "search", Arguments: raw}},
			}}})
			req := request("openai", "gpt-test", user("search"))
			// Among other tools: the call's arguments follow the schema of the tool it names.
			req.Tools = []*typev1.Tool{{Name: "lookup", InputSchema: other}, {Name: "search", InputSchema: schema}, {Name: "clock"}}
			req.StrictMode = tc.strict
			resp, err := openAIClient(t, srv, nil).Generate(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			call := resp.GetToolCalls()[0]
			if resp.GetAdapterStatus() != tc.status || !reflect.DeepEqual(args(call), tc.args) || call.GetRawArguments() != raw {
				t.Errorf("status %v arguments %v raw %q", resp.GetAdapterStatus(), args(call), call.GetRawArguments())
			}
			wantRepairs := 0
			if !tc.strict {
				wantRepairs = 1
			}
			if len(resp.GetRepairs()) != wantRepairs || (wantRepairs == 1 && resp.GetRepairs()[0] != "tool call call_1 (search): parsed the string at /filters as a JSON object") {
				t.Errorf("repairs = %q", resp.GetRepairs())
			}
		})
	}
}

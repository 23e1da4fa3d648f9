package generation_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
)

// streamedCall is a tool call put together from its streamed fragments.
type streamedCall struct {
	id, name, arguments string
	fragments           int
}

// assembleCalls joins the tool-call fragments by index, checking that each call opens with
// a fragment naming it, that only that first fragment carries the id and name, and that the
// indices count up from 0 in the order the calls start.
func assembleCalls(t *testing.T, deltas []*generationv1.Delta) []*streamedCall {
	t.Helper()
	var calls []*streamedCall
	for _, d := range deltas {
		f := d.GetToolCall()
		if f == nil {
			continue
		}
		if d.GetContent() != "" || d.GetReasoning() != "" {
			t.Errorf("delta %v mixes text and a tool-call fragment", d)
		}
		i := int(f.GetIndex())
		switch {
		case i == len(calls):
			if f.GetName() == "" {
				t.Errorf("the first fragment of call %d has no name: %v", i, f)
			}
			calls = append(calls, &streamedCall{id: f.GetId(), name: f.GetName()})
		case i < 0 || i > len(calls):
			t.Fatalf("fragment index %d, but %d calls started so far", i, len(calls))
		case f.GetId() != "" || f.GetName() != "":
			t.Errorf("a later fragment of call %d repeats the id or name: %v", i, f)
		}
		calls[i].arguments += f.GetArguments()
		if f.GetArguments() != "" {
			calls[i].fragments++
		}
	}
	return calls
}

// checkFragments asserts the fragments add up to the final answer's tool calls.
func checkFragments(t *testing.T, deltas []*generationv1.Delta, final *generationv1.GenerateResponse) []*streamedCall {
	t.Helper()
	calls := assembleCalls(t, deltas)
	if len(calls) != len(final.GetToolCalls()) {
		t.Fatalf("fragments of %d calls, the final answer has %d: %v", len(calls), len(final.GetToolCalls()), final.GetToolCalls())
	}
	for i, c := range calls {
		want := final.GetToolCalls()[i]
		if c.id != want.GetId() || c.name != want.GetName() || c.arguments != want.GetRawArguments() {
			t.Errorf("call %d streamed as id %q name %q arguments %q; final id %q name %q raw arguments %q",
				i, c.id, c.name, c.arguments, want.GetId(), want.GetName(), want.GetRawArguments())
		}
	}
	return calls
}

func TestStreamedToolCallFragments(t *testing.T) {
	scripted := []llmtest.ToolCall{
		{ID: "call_paris", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius", "days": 3}`},
		{ID: "call_rome", Name: "get_weather", Arguments: `{"city": "Ro`}, // repaired in the final answer
		{ID: "call_time", Name: "current_time"},                           // no arguments at all
	}
	for _, tc := range []struct {
		provider string
		client   func(*testing.T, *llmtest.Server) generationv1.GenerationServiceClient
		noArgs   string // raw arguments of the call without arguments
	}{
		{provider: "openai", noArgs: "", client: func(t *testing.T, srv *llmtest.Server) generationv1.GenerationServiceClient {
			return openAIClient(t, srv, nil)
		}},
		{provider: "anthropic", noArgs: "{}", client: func(t *testing.T, srv *llmtest.Server) generationv1.GenerationServiceClient {
			return anthropicClient(t, srv, nil)
		}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "weather", Turns: []llmtest.Turn{{
				Reasoning: "Two cities and the time.", Content: "Checking.", ToolCalls: scripted,
			}}})
			req := request(tc.provider, "m", user("weather"))
			req.Tools = []*typev1.Tool{tool("get_weather", "city", "unit"), tool("current_time")}
			deltas, final, err := streamAll(t, tc.client(t, srv), req)
			if err != nil {
				t.Fatal(err)
			}
			calls := checkFragments(t, deltas, final)
			if calls[0].fragments < 3 {
				t.Errorf("the long arguments came in %d fragments, want them streamed in several", calls[0].fragments)
			}
			if got := final.GetToolCalls()[2].GetRawArguments(); got != tc.noArgs {
				t.Errorf("raw arguments of the call without arguments = %q, want %q", got, tc.noArgs)
			}
			if rome := final.GetToolCalls()[1]; args(rome)["city"] != "Ro" ||
				final.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_RECOVERED {
				t.Errorf("the final answer must carry the repaired call: %v (%v)", rome, final.GetAdapterStatus())
			}
			content, reasoning, _ := joinDeltas(deltas)
			if content != "Checking." || reasoning != "Two cities and the time." {
				t.Errorf("text deltas %q %q", content, reasoning)
			}
		})
	}
}

// TestOmittedToolCallDeltas: a stream asked to omit_tool_call_deltas carries the text and
// reasoning deltas, no fragment of a tool call, and the same final answer, calls complete.
func TestOmittedToolCallDeltas(t *testing.T) {
	scripted := []llmtest.ToolCall{
		{ID: "call_paris", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius", "days": 3}`},
		{ID: "call_time", Name: "current_time"},
	}
	for _, tc := range []struct {
		provider string
		client   func(*testing.T, *llmtest.Server) generationv1.GenerationServiceClient
	}{
		{"openai", func(t *testing.T, srv *llmtest.Server) generationv1.GenerationServiceClient {
			return openAIClient(t, srv, nil)
		}},
		{"anthropic", func(t *testing.T, srv *llmtest.Server) generationv1.GenerationServiceClient {
			return anthropicClient(t, srv, nil)
		}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			answer := llmtest.Turn{Reasoning: "The weather, then the time.", Content: "Checking.", ToolCalls: scripted}
			srv := llmtest.New(t, llmtest.Scenario{Match: "weather", Turns: []llmtest.Turn{answer, answer}})
			client := tc.client(t, srv)
			req := func() *generationv1.GenerateRequest {
				r := request(tc.provider, "m", user("weather"))
				r.Tools = []*typev1.Tool{tool("get_weather", "city", "unit"), tool("current_time")}
				return r
			}
			all, want, err := streamAll(t, client, req())
			if err != nil {
				t.Fatal(err)
			}
			if len(assembleCalls(t, all)) != 2 {
				t.Fatalf("without omit_tool_call_deltas, deltas %v", all)
			}
			deltas, final, err := streamOf(t, client, &generationv1.GenerateStreamRequest{Request: req(), OmitToolCallDeltas: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range deltas {
				if d.GetToolCall() != nil {
					t.Errorf("a tool-call delta came although omitted: %v", d)
				}
			}
			if content, reasoning, _ := joinDeltas(deltas); content != "Checking." || reasoning != "The weather, then the time." {
				t.Errorf("text deltas %q %q", content, reasoning)
			}
			if len(final.GetToolCalls()) != 2 {
				t.Fatalf("final answer %v, want both calls", final)
			}
			for i, c := range final.GetToolCalls() {
				if w := want.GetToolCalls()[i]; c.GetId() != w.GetId() || c.GetName() != w.GetName() || c.GetRawArguments() != w.GetRawArguments() {
					t.Errorf("call %d %v, want %v as when the deltas are streamed", i, c, w)
				}
			}
		})
	}
}

func TestStreamedToolCallsOfPlainJSONAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		provider func(*testing.T, string) generation.Provider
		body     string
	}{
		{
			name: "openai",
			provider: func(t *testing.T, url string) generation.Provider {
				return openAIAt(t, url, nil)
			},
			body: `{"model":"m","choices":[{"message":{"content":null,"tool_calls":[` +
				`{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
				`{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},"finish_reason":"tool_calls"}]}`,
		},
		{
			name: "anthropic",
			provider: func(t *testing.T, url string) generation.Provider {
				return anthropicAt(t, url, nil)
			},
			body: `{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use","content":[` +
				`{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},` +
				`{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Rome"}}]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := replying(200, nil, tc.body)(t)
			client := serveProviders(t, map[string]generation.Provider{"p": tc.provider(t, url)})
			deltas, final, err := streamAll(t, client, request("p", "m", user("weather")))
			if err != nil {
				t.Fatal(err)
			}
			calls := checkFragments(t, deltas, final)
			if len(calls) != 2 || len(deltas) != 2 || calls[1].arguments != `{"city":"Rome"}` {
				t.Errorf("want one whole fragment per call, got %d deltas: %+v %+v", len(deltas), calls[0], calls[1])
			}
		})
	}
}

func TestAnthropicStreamedToolInputWithoutFragments(t *testing.T) {
	// A tool_use block whose input comes whole in content_block_start, with no
	// input_json_delta, is forwarded as one arguments fragment when the block stops.
	body := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[]}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\",\"input\":{\"city\":\"Paris\"}}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"get_weather\",\"input\":{\"city\":\"Rome\"}}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	url, _ := replyingSSE(body)(t)
	client := serveProviders(t, map[string]generation.Provider{"anthropic": anthropicAt(t, url, nil)})
	deltas, final, err := streamAll(t, client, request("anthropic", "m", user("weather")))
	if err != nil {
		t.Fatal(err)
	}
	calls := checkFragments(t, deltas, final)
	// The second block never stops; its input is forwarded when the message does.
	if len(calls) != 2 || calls[0].arguments != `{"city":"Paris"}` || calls[1].arguments != `{"city":"Rome"}` || len(deltas) != 4 {
		t.Errorf("%d deltas, calls %+v %+v", len(deltas), calls[0], calls[1])
	}
}

func TestAnthropicStreamRejectsBrokenToolBlocks(t *testing.T) {
	start := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[]}}\n\n"
	toolStart := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}}\n\n"
	for _, tc := range []struct {
		name, body, want string
	}{
		{
			name: "a block started twice",
			body: start + toolStart + toolStart,
			want: "the stream started content block 0 twice",
		},
		{
			name: "input after the block stopped",
			body: start + toolStart + "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
			want: "input_json_delta for content block 0 after it stopped",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := replyingSSE(tc.body)(t)
			client := serveProviders(t, map[string]generation.Provider{"anthropic": anthropicAt(t, url, nil)})
			_, _, err := streamAll(t, client, request("anthropic", "m", user("x")))
			se := stageError(t, err, codes.Unavailable)
			if !strings.Contains(se.Msg, tc.want) {
				t.Errorf("error %q, want %q", se.Msg, tc.want)
			}
		})
	}
}

// TestParallelCallsStreamedAtOneIndex: Ollama's OpenAI-compatible API streams each of a
// turn's parallel calls with index 0 and an id of its own (ollama/ollama#15457). They were
// merged into the first call, whose arguments became two JSON objects, "repaired" to the
// first: the second call never ran and nothing said so.
func TestParallelCallsStreamedAtOneIndex(t *testing.T) {
	const sse = `data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"write_file","arguments":"{\"path\":"}}]}}]}

data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]}}]}

data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"b.txt\"}"}}]}}]}

data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]}

data: [DONE]

`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, sse)
	}))
	t.Cleanup(srv.Close)
	p := generation.NewOpenAI(generation.OpenAIOptions{BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
	res, err := p.Stream(t.Context(), &generation.Request{Model: "llama3", Messages: []*typev1.Message{user("write both")}},
		func(*generationv1.Delta) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range res.ToolCalls {
		got = append(got, c.ID+" "+c.Name+" "+c.Arguments)
	}
	want := []string{`call_a write_file {"path":"a.txt"}`, `call_b write_file {"path":"b.txt"}`}
	if !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// TestInterleavedParallelCallsAssembleByIndex: OpenAI streams the fragments of parallel calls
// by their index, and nothing makes a server send them in order: a call at index 1 may start
// before the one at index 0, and the arguments of the two may alternate. The calls must be
// assembled by index and come out ordered by it, in the final answer and in the deltas'
// indices; they came out in the order they started.
func TestInterleavedParallelCallsAssembleByIndex(t *testing.T) {
	// frag is a fragment of the call at index; the first of a call names its id (call_<id>).
	frag := func(index int, id, arguments string) string {
		head, name := "", ""
		if id != "" {
			head, name = `"id":"call_`+id+`","type":"function",`, `"name":"write_file",`
		}
		return `{"index":` + strconv.Itoa(index) + `,` + head + `"function":{` + name +
			`"arguments":` + strconv.Quote(arguments) + `}}`
	}
	chunk := func(frags ...string) string {
		return `data: {"choices":[{"delta":{"tool_calls":[` + strings.Join(frags, ",") + `]}}]}` + "\n\n"
	}
	body := chunk(frag(1, "b", `{"path":`)) +
		chunk(frag(0, "a", `{"pa`)) +
		chunk(frag(1, "", `"b.txt"}`)) +
		chunk(frag(0, "", `th":`), frag(0, "", `"a.txt"}`)) +
		"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	url, _ := replyingSSE(body)(t)
	client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
	req := request("openai", "gpt-test", user("write both"))
	req.Tools = []*typev1.Tool{tool("write_file", "path")}
	deltas, final, err := streamAll(t, client, req)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range final.GetToolCalls() {
		got = append(got, c.GetId()+" "+c.GetRawArguments())
	}
	want := []string{`call_a {"path":"a.txt"}`, `call_b {"path":"b.txt"}`}
	if !slices.Equal(got, want) {
		t.Fatalf("final calls %q, want %q", got, want)
	}
	streamed := map[int32]string{}
	for _, d := range deltas {
		if f := d.GetToolCall(); f != nil {
			streamed[f.GetIndex()] += f.GetArguments()
		}
	}
	for i, c := range final.GetToolCalls() {
		if streamed[int32(i)] != c.GetRawArguments() {
			t.Errorf("fragments with index %d add up to %q, the final call %d is %q",
				i, streamed[int32(i)], i, c.GetRawArguments())
		}
	}
}

// TestToolCallIndicesWithGaps: a server whose calls' indices skip numbers (0 and 2, a call
// it dropped between them, or indices it numbers in its own way) answers two calls, not
// three: they come out ordered by index, at positions 0 and 1, and the deltas' indices are
// those positions (the final answer's, which Delta.tool_call.index promises), whatever order
// the calls started in. A call that never got a name is rejected, as any malformed call is.
func TestToolCallIndicesWithGaps(t *testing.T) {
	frag := func(index int, id, name, arguments string) string {
		head := ""
		if id != "" {
			head = `"id":"call_` + id + `","type":"function",`
		}
		if name != "" {
			name = `"name":"` + name + `",`
		}
		return `data: {"choices":[{"delta":{"tool_calls":[{"index":` + strconv.Itoa(index) + `,` + head +
			`"function":{` + name + `"arguments":` + strconv.Quote(arguments) + `}}]}}]}` + "\n\n"
	}
	const end = "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	for _, tc := range []struct {
		name     string
		body     string
		want     []string // id name raw arguments, in order
		rejected string   // the repair that must say a call was rejected, if any
	}{
		{name: "in order", body: frag(0, "a", "write_file", `{"path":"a"}`) +
			frag(2, "c", "write_file", `{"path":`) + frag(2, "", "", `"c"}`) + end,
			want: []string{`call_a write_file {"path":"a"}`, `call_c write_file {"path":"c"}`}},
		{name: "the later index first", body: frag(4, "e", "write_file", `{"path":"e"}`) +
			frag(1, "b", "write_file", `{"path":"b"}`) + frag(4, "", "", ` `) + end,
			want: []string{`call_b write_file {"path":"b"}`, `call_e write_file {"path":"e"} `}},
		{name: "a call without a name", body: frag(0, "a", "write_file", `{"path":"a"}`) +
			frag(2, "c", "", `{"path":"c"}`) + end,
			want:     []string{`call_a write_file {"path":"a"}`, `call_c  {"path":"c"}`},
			rejected: "tool call call_c (): rejected: the tool call has no name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := replyingSSE(tc.body)(t)
			client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, url, nil)})
			req := request("openai", "gpt-test", user("write them"))
			req.Tools = []*typev1.Tool{tool("write_file", "path")}
			deltas, final, err := streamAll(t, client, req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range final.GetToolCalls() {
				got = append(got, c.GetId()+" "+c.GetName()+" "+c.GetRawArguments())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("final calls %q, want %q", got, tc.want)
			}
			streamed := map[int32]*streamedCall{}
			for _, d := range deltas {
				f := d.GetToolCall()
				if f == nil {
					continue
				}
				c := streamed[f.GetIndex()]
				if c == nil {
					c = &streamedCall{}
					streamed[f.GetIndex()] = c
				}
				c.id += f.GetId()
				c.name += f.GetName()
				c.arguments += f.GetArguments()
			}
			if len(streamed) != len(tc.want) {
				t.Errorf("fragments of %d calls, want %d", len(streamed), len(tc.want))
			}
			for i, c := range final.GetToolCalls() {
				s := streamed[int32(i)]
				if s == nil || s.id != c.GetId() || s.name != c.GetName() || s.arguments != c.GetRawArguments() {
					t.Errorf("fragments with index %d are %+v, the final call %d is %v", i, s, i, c)
				}
			}
			switch {
			case tc.rejected == "" && final.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE:
				t.Errorf("adapter status %v (%q), want NATIVE", final.GetAdapterStatus(), final.GetRepairs())
			case tc.rejected != "" && (final.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_REJECTED ||
				!slices.Contains(final.GetRepairs(), tc.rejected)):
				t.Errorf("adapter status %v repairs %q, want REJECTED with %q",
					final.GetAdapterStatus(), final.GetRepairs(), tc.rejected)
			}
		})
	}
}

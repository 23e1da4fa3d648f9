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

func TestAnthropicTextAnswer(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Name: "text", Match: "What is agentmesh?", Turns: []llmtest.Turn{{
		Content:   "A gRPC agent runtime.",
		Reasoning: "The user asks about the project.",
		Usage:     &llmtest.Usage{PromptTokens: 40, CompletionTokens: 7, CachedTokens: 32},
	}}})
	client := anthropicClient(t, srv, nil)

	resp, err := client.Generate(t.Context(), request("anthropic", "claude-test",
		system("Be brief."), system("Answer in English."), user("What is agentmesh?")))
	if err != nil {
		t.Fatal(err)
	}
	// The signed thinking block travels as reasoning_state, to be sent back next turn.
	state := `{"anthropic_thinking":[{"type":"thinking","thinking":"The user asks about the project.","signature":"` +
		llmtest.Sign("The user asks about the project.") + `"}]}`
	want := &generationv1.GenerateResponse{
		Type:           generationv1.ResponseType_RESPONSE_TYPE_MESSAGE,
		Content:        "A gRPC agent runtime.",
		Reasoning:      "The user asks about the project.",
		ReasoningState: []byte(state),
		Usage:          &typev1.TokenUsage{Input: 40, Output: 7, Cached: 32, Total: 47},
		StopReason:     "stop",
		Provider:       "anthropic",
		Model:          "claude-test",
		AdapterStatus:  generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE,
		LatencyMs:      resp.GetLatencyMs(),
	}
	if !proto.Equal(resp, want) {
		t.Errorf("response = %v\nwant %v", resp, want)
	}

	got := srv.Requests()[0]
	if got.Path != "/v1/messages" || got.Model != "claude-test" || got.System != "Be brief.\n\nAnswer in English." ||
		len(got.Messages) != 1 || got.Messages[0].Role != "user" || got.Messages[0].Content != "What is agentmesh?" {
		t.Errorf("wire request = %+v", got)
	}
	h := got.Header
	if h.Get("x-api-key") != testAPIKey || h.Get("anthropic-version") != generation.DefaultAnthropicVersion ||
		h.Get("X-Team") != "agents" || h.Get("Authorization") != "" {
		t.Errorf("headers = %v", h)
	}
	if got.MaxTokens == nil || *got.MaxTokens != generation.DefaultAnthropicMaxTokens {
		t.Errorf("max_tokens = %v, want the default %d (the API requires it)", got.MaxTokens, generation.DefaultAnthropicMaxTokens)
	}
	for _, field := range []string{"temperature", "top_p", "tool_choice", "tools", "stream", "thinking", "stop_sequences"} {
		if got.Has(field) {
			t.Errorf("request carries %q although it was not set: %s", field, got.Raw[field])
		}
	}
}

func TestAnthropicToolUseWithThinkingRoundTrip(t *testing.T) {
	budget, maxTokens := 4096, 8192
	srv := llmtest.New(t, llmtest.Scenario{Name: "calc", Match: "weather in Paris and Rome", Turns: []llmtest.Turn{
		{
			Reasoning: "Two cities, two calls.",
			ToolCalls: []llmtest.ToolCall{
				{ID: "toolu_a", Name: "get_weather", Arguments: `{"city": "Paris"}`},
				{ID: "toolu_b", Name: "get_weather", Arguments: `{"city": "Rome"}`},
			},
			Expect: &llmtest.Expect{Tools: []string{"get_weather"}, ThinkingBudget: &budget, MaxTokens: &maxTokens, ToolChoice: "auto"},
		},
		{Content: "Sunny in both.", Expect: &llmtest.Expect{ThinkingBudget: &budget}},
	}})
	provider := anthropicAt(t, srv.URL(), nil)
	client := serveProviders(t, map[string]generation.Provider{"anthropic": provider})

	req := request("anthropic", "claude-test", user("weather in Paris and Rome"))
	req.Tools = []*typev1.Tool{tool("get_weather", "city")}
	req.ToolChoice = "auto"
	req.Sampling = &generationv1.Sampling{MaxOutputTokens: 8192, ReasoningEffort: "medium"}
	resp, err := client.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL || resp.GetStopReason() != "tool_calls" ||
		resp.GetReasoning() != "Two cities, two calls." || len(resp.GetToolCalls()) != 2 {
		t.Fatalf("response = %v", resp)
	}
	for i, city := range []string{"Paris", "Rome"} {
		if c := resp.GetToolCalls()[i]; args(c)["city"] != city || c.GetName() != "get_weather" {
			t.Errorf("call %d = %v", i, c)
		}
	}
	first := srv.Requests()[0]
	var schema map[string]any
	if err := json.Unmarshal(first.Tools[0].InputSchema, &schema); err != nil || first.Tools[0].Name != "get_weather" ||
		first.Tools[0].Description != "the get_weather tool" || schema["properties"].(map[string]any)["city"] == nil {
		t.Errorf("wire tool = %+v (%v)", first.Tools[0], err)
	}

	req.Messages = append(req.Messages,
		&typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Reasoning: resp.GetReasoning(), ToolCalls: resp.GetToolCalls()},
		toolResult("toolu_a", "get_weather", "sunny"),
		toolResult("toolu_b", "get_weather", "sunny too"),
		user("and tomorrow?"))
	resp, err = client.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetContent() != "Sunny in both." {
		t.Errorf("second answer = %v", resp)
	}
	second := srv.Requests()[1]
	if len(second.Messages) != 3 {
		t.Fatalf("messages = %+v, want user, assistant, and one user message with both results and the text", second.Messages)
	}
	asst := second.Messages[1].Blocks
	if len(asst) != 3 || asst[0].Type != "thinking" || asst[0].Thinking != "Two cities, two calls." || asst[0].Signature != llmtest.Sign("Two cities, two calls.") ||
		asst[1].Type != "tool_use" || asst[1].ID != "toolu_a" || string(asst[1].Input) != `{"city":"Paris"}` || asst[2].ID != "toolu_b" {
		t.Errorf("assistant blocks = %+v; the signed thinking block must be replayed first", asst)
	}
	results := second.Messages[2].Blocks
	if len(results) != 3 || results[0].Type != "tool_result" || results[0].ToolUseID != "toolu_a" || results[0].Content != "sunny" ||
		results[1].ToolUseID != "toolu_b" || results[2].Type != "text" || results[2].Text != "and tomorrow?" {
		t.Errorf("user blocks = %+v", results)
	}

	// Without reasoning_state in the assistant message, a provider that did not see the first
	// answer (e.g. after a restart) cannot replay the signed block; the API rejects the
	// continuation and the failure says why.
	rejecting := llmtest.New(&discardTB{TB: t}, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{}, {}}})
	fresh := serveProviders(t, map[string]generation.Provider{"anthropic": anthropicAt(t, rejecting.URL(), nil)})
	_, err = fresh.Generate(t.Context(), req)
	se := stageError(t, err, codes.InvalidArgument)
	if !strings.Contains(se.Msg, "request refused (HTTP 400") || !strings.Contains(se.Msg, "Expected `thinking` or `redacted_thinking`") {
		t.Errorf("error = %q", se.Msg)
	}
}

// discardTB is a testing.TB whose llmtest errors are expected and dropped.
type discardTB struct{ testing.TB }

func (d *discardTB) Errorf(string, ...any) {}
func (d *discardTB) Helper()               {}

func TestAnthropicStream(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "weather in Paris and Rome", Turns: []llmtest.Turn{{
		Reasoning: "Two cities, two calls.",
		Content:   "Let me check both cities for you.",
		ToolCalls: []llmtest.ToolCall{
			{ID: "toolu_1", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius"}`},
			{ID: "toolu_2", Name: "get_weather", Arguments: `{"city": "Rome", "unit": "celsius"}`},
		},
		Usage: &llmtest.Usage{PromptTokens: 55, CompletionTokens: 21, CachedTokens: 5},
	}}})
	client := anthropicClient(t, srv, nil)

	req := request("anthropic", "claude-test", user("weather in Paris and Rome"))
	req.Tools = tools("get_weather")
	deltas, final, err := streamAll(t, client, req)
	if err != nil {
		t.Fatal(err)
	}
	content, reasoning, parts := joinDeltas(deltas)
	if content != "Let me check both cities for you." || parts < 3 || reasoning != "Two cities, two calls." {
		t.Errorf("deltas: content %q in %d parts, reasoning %q", content, parts, reasoning)
	}
	if final.GetContent() != content || final.GetReasoning() != reasoning || final.GetStopReason() != "tool_calls" ||
		final.GetType() != generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL || len(final.GetToolCalls()) != 2 {
		t.Fatalf("final = %v", final)
	}
	for i, city := range []string{"Paris", "Rome"} {
		c := final.GetToolCalls()[i]
		if c.GetId() != []string{"toolu_1", "toolu_2"}[i] || args(c)["city"] != city || args(c)["unit"] != "celsius" {
			t.Errorf("call %d = %v", i, c)
		}
	}
	if u := final.GetUsage(); u.GetInput() != 55 || u.GetCached() != 5 || u.GetOutput() != 21 || u.GetTotal() != 76 {
		t.Errorf("usage = %v", u)
	}
	if got := srv.Requests()[0]; !got.Stream || got.Has("stream_options") {
		t.Errorf("stream %v, raw %v", got.Stream, got.Raw)
	}
}

func TestAnthropicMalformedArgumentsAreRepaired(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "toolu_1", Name: "get_weather", Arguments: `{"city": "Par`}}},
	}})
	client := anthropicClient(t, srv, nil)
	for _, stream := range []bool{false, true} {
		req := request("anthropic", "claude-test", user("x"))
		var resp *generationv1.GenerateResponse
		var err error
		if stream {
			_, resp, err = streamAll(t, client, req)
		} else {
			resp, err = client.Generate(t.Context(), req)
		}
		if err != nil {
			t.Fatal(err)
		}
		call := resp.GetToolCalls()[0]
		if resp.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_RECOVERED || args(call)["city"] != "Par" {
			t.Errorf("stream %v: status %v args %v repairs %q", stream, resp.GetAdapterStatus(), args(call), resp.GetRepairs())
		}
		wantFirst := "closed an unterminated string"
		if !stream {
			wantFirst = "decoded an object sent as a JSON string" // a JSON answer carries broken input as a string
		}
		if !strings.Contains(resp.GetRepairs()[0], wantFirst) {
			t.Errorf("stream %v: repairs %q, want %q first", stream, resp.GetRepairs(), wantFirst)
		}
	}
}

func TestAnthropicSamplingPassedExactly(t *testing.T) {
	temp, topP, maxTokens := 0.0, 0.9, 128
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
		Content: "ok",
		Expect: &llmtest.Expect{Temperature: &temp, TopP: &topP, MaxTokens: &maxTokens, Stop: []string{"END"},
			ToolChoice: "required", Tools: []string{"search"}},
	}}})
	req := request("anthropic", "claude-test", user("x"))
	req.Tools = tools("search")
	req.ToolChoice = "required"
	req.Sampling = &generationv1.Sampling{Temperature: ptr(0.0), TopP: ptr(0.9), MaxOutputTokens: 128, Stop: []string{"END"}}
	if _, err := anthropicClient(t, srv, nil).Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0]; string(got.ToolChoice) != `{"type":"any"}` || got.Has("thinking") {
		t.Errorf("tool_choice %s thinking %s", got.ToolChoice, got.Raw["thinking"])
	}

	for choice, wire := range map[string]string{"auto": `{"type":"auto"}`, "none": `{"type":"none"}`, "search": `{"name":"search","type":"tool"}`} {
		srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok"}}})
		req.ToolChoice, req.Sampling = choice, nil
		if _, err := anthropicClient(t, srv, nil).Generate(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if got := srv.Requests()[0]; string(got.ToolChoice) != wire {
			t.Errorf("tool_choice %q sent as %s, want %s", choice, got.ToolChoice, wire)
		}
	}
}

func TestAnthropicReasoningEffort(t *testing.T) {
	for _, tc := range []struct {
		effort    string
		maxTokens int64
		budget    int // 0: thinking off
		invalid   string
	}{
		{effort: "minimal", budget: 1024},
		{effort: "low", budget: 1024},
		{effort: "medium", budget: 4096, maxTokens: 8192},
		{effort: "high", maxTokens: 32000, budget: 16384},
		{effort: "high", budget: 4095}, // capped below the default max_tokens 4096
		{effort: "MAX", maxTokens: 64000, budget: 32768},
		{effort: "2500", budget: 2500},
		{effort: "none"},
		{effort: "off"},
		{effort: "extreme", invalid: `reasoning_effort "extreme" is not minimal, low, medium, high, max or a token budget`},
		{effort: "low", maxTokens: 1000, invalid: "needs a thinking budget of at least 1024 tokens below max_tokens, but max_output_tokens is 1000"},
	} {
		t.Run(tc.effort, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok"}}})
			req := request("anthropic", "claude-test", user("x"))
			req.Sampling = &generationv1.Sampling{ReasoningEffort: tc.effort, MaxOutputTokens: tc.maxTokens}
			_, err := anthropicClient(t, srv, nil).Generate(t.Context(), req)
			if tc.invalid != "" {
				if se := stageError(t, err, codes.InvalidArgument); !strings.Contains(se.Msg, tc.invalid) {
					t.Errorf("error %q, want %q", se.Msg, tc.invalid)
				}
				if n := len(srv.Requests()); n != 0 {
					t.Errorf("%d requests sent", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := srv.Requests()[0]
			switch {
			case tc.budget == 0 && got.Has("thinking"):
				t.Errorf("thinking = %s, want none", got.Raw["thinking"])
			case tc.budget > 0 && (got.Thinking == nil || got.Thinking.Type != "enabled" || got.Thinking.BudgetTokens != tc.budget):
				t.Errorf("thinking = %s, want budget %d", got.Raw["thinking"], tc.budget)
			}
		})
	}
}

func TestAnthropicEmbedIsNotSupported(t *testing.T) {
	srv := llmtest.New(t)
	_, err := anthropicClient(t, srv, nil).Embed(t.Context(), &generationv1.EmbedRequest{
		Target: &typev1.Target{Provider: "anthropic", Model: "claude-test"}, Inputs: []string{"x"},
	})
	se := stageError(t, err, codes.FailedPrecondition)
	if !strings.Contains(se.Msg, "no embeddings endpoint") || len(srv.Requests()) != 0 {
		t.Errorf("error %q after %d requests", se.Msg, len(srv.Requests()))
	}
}

func TestAnthropicDefaults(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok"}}})
	p := anthropicAt(t, srv.URL(), func(o *generation.AnthropicOptions) { o.Name, o.APIKey, o.Version = "", "", "2099-01-01" })
	if p.Name() != "anthropic" {
		t.Errorf("default name = %q", p.Name())
	}
	client := serveProviders(t, map[string]generation.Provider{"claude": p})
	empty := &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT}
	if _, err := client.Generate(t.Context(), request("claude", "m", user("x"), empty, user("y"))); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if got.Header.Get("anthropic-version") != "2099-01-01" || got.Header.Get("x-api-key") != "" {
		t.Errorf("headers %v", got.Header)
	}
	if len(got.Messages) != 1 || len(got.Messages[0].Blocks) != 2 || got.Messages[0].Blocks[1].Text != "y" {
		t.Errorf("messages = %+v; the empty assistant message must be dropped and the user texts merged", got.Messages)
	}
}

func TestAnthropicToolResultsComeFirst(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{}, {Content: "ok"}}})
	client := anthropicClient(t, srv, nil)
	// A user notice between a tool call and its result lands in the same user message, after
	// the tool_result block.
	req := request("anthropic", "m", user("x"), assistantCall("toolu_1", "calc", `{}`), user("note"), toolResult("toolu_1", "calc", "42"))
	if _, err := client.Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Requests()[0].Messages
	if len(msgs) != 3 || len(msgs[2].Blocks) != 2 || msgs[2].Blocks[0].Type != "tool_result" || msgs[2].Blocks[1].Text != "note" {
		t.Errorf("messages = %+v", msgs)
	}
}

// TestAnthropicThinkingDropsWhatItRefuses: with extended thinking on, the Messages API
// refuses a changed temperature, a top_p under 0.95 and forced tool use (HTTP 400, never
// retried), as the scripted server now does. A provider-wide temperature with a request's
// reasoning_effort, or a run whose tool policy forces a tool, failed every such request; they
// are left out (forced tool use becomes auto), and a top_p from 0.95 stays.
func TestAnthropicThinkingDropsWhatItRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sampling *generationv1.Sampling
		choice   string
		want     map[string]string // what the request sends, "" for absent
	}{
		{"temperature and top_p", &generationv1.Sampling{Temperature: ptr(0.2), TopP: ptr(0.5), MaxOutputTokens: 8000, ReasoningEffort: "medium"}, "",
			map[string]string{"temperature": "", "top_p": ""}},
		{"a top_p it takes", &generationv1.Sampling{TopP: ptr(0.96), MaxOutputTokens: 8000, ReasoningEffort: "low"}, "",
			map[string]string{"top_p": "0.96"}},
		{"forced tool use", &generationv1.Sampling{MaxOutputTokens: 8000, ReasoningEffort: "low"}, "required",
			map[string]string{"tool_choice": `{"type":"auto"}`}},
		{"a forced tool", &generationv1.Sampling{MaxOutputTokens: 8000, ReasoningEffort: "low"}, "search",
			map[string]string{"tool_choice": `{"type":"auto"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok"}}})
			req := request("anthropic", "claude-test", user("x"))
			req.Tools, req.ToolChoice, req.Sampling = tools("search"), tc.choice, tc.sampling
			if _, err := anthropicClient(t, srv, nil).Generate(t.Context(), req); err != nil {
				t.Fatalf("Generate = %v", err)
			}
			got := srv.Requests()[0]
			if !got.Has("thinking") {
				t.Errorf("thinking dropped: %s", got.Raw["thinking"])
			}
			for field, want := range tc.want {
				if sent := string(got.Raw[field]); sent != want {
					t.Errorf("%s sent as %q, want %q", field, sent, want)
				}
			}
		})
	}
}

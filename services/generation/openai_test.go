package generation_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/protobuf/proto"
)

func TestOpenAITextAnswer(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Name: "text", Match: "What is agentmesh?", Turns: []llmtest.Turn{{
		Content:   "A gRPC agent runtime.",
		Reasoning: "The user asks about the project.",
		Usage:     &llmtest.Usage{PromptTokens: 40, CompletionTokens: 7, CachedTokens: 32},
	}}})
	client := openAIClient(t, srv, nil)

	resp, err := client.Generate(t.Context(), request("openai", "gpt-test", system("Be brief."), user("What is agentmesh?")))
	if err != nil {
		t.Fatal(err)
	}
	want := &generationv1.GenerateResponse{
		Type:          generationv1.ResponseType_RESPONSE_TYPE_MESSAGE,
		Content:       "A gRPC agent runtime.",
		Reasoning:     "The user asks about the project.",
		Usage:         &typev1.TokenUsage{Input: 40, Output: 7, Cached: 32, Total: 47},
		StopReason:    "stop",
		Provider:      "openai",
		Model:         "gpt-test",
		AdapterStatus: generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE,
		LatencyMs:     resp.GetLatencyMs(),
	}
	if !proto.Equal(resp, want) {
		t.Errorf("response = %v\nwant %v", resp, want)
	}
	if resp.GetLatencyMs() < 0 {
		t.Errorf("latency = %d", resp.GetLatencyMs())
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d, want 1", len(reqs))
	}
	got := reqs[0]
	if got.Model != "gpt-test" || len(got.Messages) != 2 || got.Messages[0].Role != "system" ||
		got.Messages[1].Role != "user" || got.Messages[1].Content != "What is agentmesh?" {
		t.Errorf("wire request = %+v", got)
	}
	if got.Header.Get("Authorization") != "Bearer "+testAPIKey || got.Header.Get("X-Team") != "agents" ||
		got.Header.Get("Content-Type") != "application/json" || got.Header.Get("Accept") != "application/json" {
		t.Errorf("headers = %v", got.Header)
	}
	for _, field := range []string{"temperature", "top_p", "max_tokens", "tool_choice", "tools", "stream", "stream_options", "reasoning_effort", "stop"} {
		if got.Has(field) {
			t.Errorf("request carries %q although it was not set: %s", field, got.Raw[field])
		}
	}
}

func TestOpenAIToolCallRoundTrip(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Name: "calc", Match: "what is 6 times 7", Turns: []llmtest.Turn{
		{
			ToolCalls: []llmtest.ToolCall{{ID: "call_abc", Name: "calculator", Arguments: `{"expression": "6*7"}`}},
			Expect:    &llmtest.Expect{Tools: []string{"calculator", "current_time"}},
		},
		{Content: "6 times 7 is 42."},
	}})
	client := openAIClient(t, srv, nil)

	req := request("openai", "gpt-test", user("what is 6 times 7"))
	req.Tools = []*typev1.Tool{tool("calculator", "expression"), {Name: "current_time"}}
	resp, err := client.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL || resp.GetStopReason() != "tool_calls" ||
		resp.GetAdapterStatus() != generationv1.AdapterStatus_ADAPTER_STATUS_NATIVE || len(resp.GetToolCalls()) != 1 {
		t.Fatalf("response = %v", resp)
	}
	call := resp.GetToolCalls()[0]
	if call.GetId() != "call_abc" || call.GetName() != "calculator" || call.GetRawArguments() != `{"expression": "6*7"}` ||
		args(call)["expression"] != "6*7" {
		t.Errorf("tool call = %v", call)
	}

	wireTools := srv.Requests()[0].Tools
	if len(wireTools) != 2 || wireTools[0].Type != "function" || wireTools[0].Function.Description != "the calculator tool" {
		t.Fatalf("wire tools = %+v", wireTools)
	}
	var schema map[string]any
	if err := json.Unmarshal(wireTools[0].Function.Parameters, &schema); err != nil || schema["type"] != "object" ||
		schema["properties"].(map[string]any)["expression"] == nil {
		t.Errorf("parameters = %s (%v)", wireTools[0].Function.Parameters, err)
	}
	if err := json.Unmarshal(wireTools[1].Function.Parameters, &schema); err != nil || schema["type"] != "object" {
		t.Errorf("a tool without schema must get an empty object schema: %s", wireTools[1].Function.Parameters)
	}

	req.Messages = append(req.Messages,
		&typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: resp.GetToolCalls()},
		toolResult("call_abc", "calculator", "42"))
	resp, err = client.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetContent() != "6 times 7 is 42." {
		t.Errorf("second turn content = %q", resp.GetContent())
	}
	second := srv.Requests()[1]
	asst, toolMsg := second.Messages[1], second.Messages[2]
	if asst.Role != "assistant" || len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Type != "function" ||
		asst.ToolCalls[0].ID != "call_abc" || asst.ToolCalls[0].Function.Arguments != `{"expression": "6*7"}` {
		t.Errorf("assistant wire message = %+v", asst)
	}
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(second.Raw["messages"], &raw); err != nil || string(raw[1]["content"]) != "null" {
		t.Errorf("assistant content with only tool calls = %s, want null", raw[1]["content"])
	}
	if toolMsg.Role != "tool" || toolMsg.ToolCallID != "call_abc" || toolMsg.Content != "42" {
		t.Errorf("tool wire message = %+v", toolMsg)
	}
}

func TestOpenAISamplingPassedExactly(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{
		Content: "ok",
		Expect:  &llmtest.Expect{Temperature: ptr(0.0), TopP: ptr(0.9), ToolChoice: "required", Tools: []string{"search"}},
	}}})
	client := openAIClient(t, srv, nil)
	req := request("openai", "gpt-test", user("x"))
	req.Tools = tools("search")
	req.ToolChoice = "required"
	req.Sampling = &generationv1.Sampling{
		Temperature: ptr(0.0), TopP: ptr(0.9), MaxOutputTokens: 128, ReasoningEffort: "low", Stop: []string{"END"},
	}
	if _, err := client.Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	got := srv.Requests()[0]
	if !got.Has("temperature") || *got.Temperature != 0 || *got.TopP != 0.9 {
		t.Errorf("temperature %s top_p %s; a zero temperature must still be sent", got.Raw["temperature"], got.Raw["top_p"])
	}
	if got.MaxTokens == nil || *got.MaxTokens != 128 || got.ReasoningEffort != "low" || !slices.Equal(got.Stop, []string{"END"}) {
		t.Errorf("max_tokens %v reasoning_effort %q stop %v", got.MaxTokens, got.ReasoningEffort, got.Stop)
	}

	req.ToolChoice = "search"
	req.Sampling = &generationv1.Sampling{TopP: ptr(0.5)}
	srv2 := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok", Expect: &llmtest.Expect{ToolChoice: "search"}}}})
	if _, err := openAIClient(t, srv2, nil).Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	got = srv2.Requests()[0]
	if got.Has("temperature") || got.Has("max_tokens") || *got.TopP != 0.5 {
		t.Errorf("only top_p was set: %v", got.Raw)
	}
	if string(got.ToolChoice) != `{"function":{"name":"search"},"type":"function"}` {
		t.Errorf("named tool_choice = %s", got.ToolChoice)
	}

	req.Tools = nil
	srv3 := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok"}}})
	if _, err := openAIClient(t, srv3, nil).Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if srv3.Requests()[0].Has("tool_choice") {
		t.Error("tool_choice sent without tools")
	}
}

func TestOpenAIStream(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "weather in Paris and Rome", Turns: []llmtest.Turn{{
		Reasoning: "Two cities, two calls.",
		Content:   "Let me check both cities for you.",
		ToolCalls: []llmtest.ToolCall{
			{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius"}`},
			{ID: "call_2", Name: "get_weather", Arguments: `{"city": "Rome", "unit": "celsius"}`},
		},
		Usage: &llmtest.Usage{PromptTokens: 55, CompletionTokens: 21},
	}}})
	client := openAIClient(t, srv, nil)

	req := request("openai", "gpt-test", user("weather in Paris and Rome"))
	req.Tools = tools("get_weather")
	deltas, final, err := streamAll(t, client, req)
	if err != nil {
		t.Fatal(err)
	}
	content, reasoning, parts := joinDeltas(deltas)
	if content != "Let me check both cities for you." || parts < 3 {
		t.Errorf("content deltas %q in %d parts, want several", content, parts)
	}
	if reasoning != "Two cities, two calls." {
		t.Errorf("reasoning deltas = %q", reasoning)
	}
	if final == nil {
		t.Fatal("no final answer")
	}
	if final.GetContent() != content || final.GetReasoning() != reasoning || final.GetCached() {
		t.Errorf("final = %v", final)
	}
	if final.GetType() != generationv1.ResponseType_RESPONSE_TYPE_TOOL_CALL || len(final.GetToolCalls()) != 2 {
		t.Fatalf("final tool calls = %v", final.GetToolCalls())
	}
	for i, city := range []string{"Paris", "Rome"} {
		c := final.GetToolCalls()[i]
		if c.GetName() != "get_weather" || args(c)["city"] != city || args(c)["unit"] != "celsius" {
			t.Errorf("call %d = %v", i, c)
		}
	}
	if u := final.GetUsage(); u.GetInput() != 55 || u.GetOutput() != 21 || u.GetTotal() != 76 {
		t.Errorf("usage = %v", u)
	}
	got := srv.Requests()[0]
	if !got.Stream || got.StreamOptions == nil || !got.StreamOptions.IncludeUsage {
		t.Errorf("stream %v stream_options %+v", got.Stream, got.StreamOptions)
	}
	if got.Header.Get("Accept") != "text/event-stream" || got.Header.Get("Content-Type") != "application/json" ||
		got.Header.Get("Authorization") != "Bearer "+testAPIKey {
		t.Errorf("headers = %v", got.Header)
	}
}

func TestOpenAIEmbed(t *testing.T) {
	srv := llmtest.New(t)
	client := openAIClient(t, srv, nil)
	resp, err := client.Embed(t.Context(), &generationv1.EmbedRequest{
		Target: &typev1.Target{Provider: "openai", Model: "text-embedding-test"},
		Inputs: []string{"first text", "second text"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetModel() != "text-embedding-test" || len(resp.GetEmbeddings()) != 2 || resp.GetUsage().GetInput() == 0 {
		t.Fatalf("response = %v", resp)
	}
	for i, text := range []string{"first text", "second text"} {
		if !slices.Equal(resp.GetEmbeddings()[i].GetValues(), llmtest.Embed(text)) {
			t.Errorf("embedding %d is not the server's vector for %q", i, text)
		}
	}
	if got := srv.Requests()[0]; got.Path != "/v1/embeddings" || !slices.Equal(got.Input, []string{"first text", "second text"}) {
		t.Errorf("wire request = %+v", got)
	}
}

// TestOpenAIEmbedWithoutUsageIsEstimated: an embeddings answer without usage (an
// OpenAI-compatible server may send none) is counted by the stage's estimate, one token per
// four bytes of the inputs, marked estimated, as a chat answer without usage is: it counted 0
// tokens, so the run's EMBEDDING entries said the requests cost nothing.
func TestOpenAIEmbedWithoutUsageIsEstimated(t *testing.T) {
	srv := llmtest.New(t)
	srv.OmitEmbeddingUsage(true)
	client := openAIClient(t, srv, nil)
	inputs := []string{"first text to embed", "the second text to embed"}
	resp, err := client.Embed(t.Context(), &generationv1.EmbedRequest{
		Target: &typev1.Target{Provider: "openai", Model: "text-embedding-test"},
		Inputs: inputs,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := tokens.Estimate(inputs[0]) + tokens.Estimate(inputs[1])
	if u := resp.GetUsage(); u.GetInput() != want || u.GetTotal() != want || u.GetOutput() != 0 || !u.GetEstimated() {
		t.Errorf("usage %v, want the estimate of the inputs, %d input tokens, estimated", u, want)
	}

	srv.OmitEmbeddingUsage(false)
	resp, err = client.Embed(t.Context(), &generationv1.EmbedRequest{
		Target: &typev1.Target{Provider: "openai", Model: "text-embedding-test"},
		Inputs: inputs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if u := resp.GetUsage(); u.GetInput() == 0 || u.GetEstimated() {
		t.Errorf("usage %v, want the reported usage, not estimated", u)
	}
}

// TestOpenAITokenLimitField (issue 11.8): the output token limit goes in max_completion_tokens
// for the OpenAI reasoning models, which refuse max_tokens with HTTP 400, and in max_tokens
// for the others, which every OpenAI-compatible server knows; TokenLimitField forces one field
// for every model. Exactly one of the two is sent, streamed or not.
func TestOpenAITokenLimitField(t *testing.T) {
	for _, tc := range []struct {
		model, forced, want string
	}{
		{model: "o3-mini", want: generation.MaxCompletionTokensField},
		{model: "o1-2024-12-17", want: generation.MaxCompletionTokensField},
		{model: "o4-mini", want: generation.MaxCompletionTokensField},
		{model: "gpt-5-nano", want: generation.MaxCompletionTokensField},
		{model: "openai/gpt-5", want: generation.MaxCompletionTokensField},
		{model: "gpt-4o", want: generation.MaxTokensField},
		{model: "qwen2.5:7b", want: generation.MaxTokensField},
		{model: "olmo-2", want: generation.MaxTokensField},
		{model: "gpt-4o", forced: generation.MaxCompletionTokensField, want: generation.MaxCompletionTokensField},
		{model: "my-o3-finetune", forced: generation.MaxTokensField, want: generation.MaxTokensField},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%s/stream=%v", tc.model, tc.forced, stream), func(t *testing.T) {
				limit := 256
				expect := &llmtest.Expect{MaxTokens: &limit}
				other := generation.MaxCompletionTokensField
				if tc.want == generation.MaxCompletionTokensField {
					expect, other = &llmtest.Expect{MaxCompletionTokens: &limit}, generation.MaxTokensField
				}
				srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok", Expect: expect}}})
				client := openAIClient(t, srv, func(o *generation.OpenAIOptions) { o.TokenLimitField = tc.forced })
				req := request("openai", tc.model, user("x"))
				req.Sampling = &generationv1.Sampling{MaxOutputTokens: int64(limit)}
				var err error
				if stream {
					_, _, err = streamAll(t, client, req)
				} else {
					_, err = client.Generate(t.Context(), req)
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := srv.Requests()[0]; got.Has(other) {
					t.Errorf("%s sent beside %s: %v", other, tc.want, got.Raw)
				}
			})
		}
	}
}

// TestOpenAIReasoningModelsGetNoTemperature: OpenAI's reasoning models refuse any temperature
// or top_p but their defaults with HTTP 400, so neither is sent to them; other models get both.
func TestOpenAIReasoningModelsGetNoTemperature(t *testing.T) {
	for _, tc := range []struct {
		model string
		sent  bool
	}{{"o3-mini", false}, {"gpt-5", false}, {"openai/o1", false}, {"gpt-4o", true}, {"qwen2.5:7b", true}} {
		t.Run(tc.model, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "ok"}}})
			req := request("openai", tc.model, user("x"))
			req.Sampling = &generationv1.Sampling{Temperature: proto.Float64(0.2), TopP: proto.Float64(0.9)}
			if _, err := openAIClient(t, srv, nil).Generate(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			got := srv.Requests()[0]
			if got.Has("temperature") != tc.sent || got.Has("top_p") != tc.sent {
				t.Errorf("temperature sent %v, top_p sent %v; want %v (%v)", got.Has("temperature"), got.Has("top_p"), tc.sent, got.Raw)
			}
		})
	}
}

// TestUsageEstimatedWhenNotReported: an OpenAI-compatible server may report no usage (a local
// server, or a stream without its usage chunk). The answer then counts the estimate of what
// was sent (the messages and the offered tools) and of what came back, marked estimated,
// where it counted 0 tokens: a run against such a server had no token budget. A count the
// provider reports is never estimated.
func TestUsageEstimatedWhenNotReported(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Scenario{Match: "text", Turns: []llmtest.Turn{{Content: "The answer is forty two.", NoUsage: true}}},
		llmtest.Scenario{Match: "call", Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression":"6*7"}`}}, NoUsage: true}}},
		llmtest.Scenario{Match: "reported", Turns: []llmtest.Turn{{Content: "Reported.", Usage: &llmtest.Usage{PromptTokens: 30, CompletionTokens: 3}}}},
	)
	client := openAIClient(t, srv, nil)
	offered := tools("calculator")
	sent := func(question string) int64 {
		return tokens.Messages([]*typev1.Message{system("Be brief."), user(question)}) + tokens.Tools(offered)
	}
	answers := []struct {
		question      string
		stream        bool
		input, output int64
		estimated     bool
	}{
		{question: "text", input: sent("text"), output: tokens.Estimate("The answer is forty two."), estimated: true},
		{question: "call", stream: true, input: sent("call"), output: tokens.Estimate("calculator") + tokens.Estimate(`{"expression":"6*7"}`), estimated: true},
		{question: "reported", stream: true, input: 30, output: 3},
	}
	for _, want := range answers {
		req := request("openai", "gpt-test", system("Be brief."), user(want.question))
		req.Tools = offered
		var (
			resp *generationv1.GenerateResponse
			err  error
		)
		if want.stream {
			_, resp, err = streamAll(t, client, req)
		} else {
			resp, err = client.Generate(t.Context(), req)
		}
		if err != nil {
			t.Fatal(err)
		}
		u := resp.GetUsage()
		if u.GetInput() != want.input || u.GetOutput() != want.output || u.GetTotal() != want.input+want.output || u.GetEstimated() != want.estimated {
			t.Errorf("%s: usage %v, want input %d, output %d, estimated %v", want.question, u, want.input, want.output, want.estimated)
		}
	}
}

package llmtest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// message is the part of an Anthropic message the tests read.
type message struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Role       string `json:"role"`
	Model      string `json:"model"`
	StopReason string `json:"stop_reason"`
	Content    []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"content"`
	Usage struct {
		InputTokens          int `json:"input_tokens"`
		OutputTokens         int `json:"output_tokens"`
		CacheReadInputTokens int `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

// messagesBody is an Anthropic request with the given messages as role/content pairs.
func messagesBody(pairs ...string) map[string]any {
	body := chatBody(pairs...)
	body["max_tokens"] = 1024
	return body
}

// postMessages sends an Anthropic request with the version header and returns the answer.
func postMessages(t *testing.T, c *http.Client, url string, body any, header http.Header) (*http.Response, []byte) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/messages", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp, buf.Bytes()
}

func TestAnthropicJSONAnswer(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "weather", Turns: []llmtest.Turn{{
		Reasoning: "Two calls.",
		Content:   "Checking.",
		ToolCalls: []llmtest.ToolCall{
			{Name: "get_weather", Arguments: `{"city": "Paris"}`},
			{ID: "toolu_mine", Name: "get_weather", Arguments: `{"city": "Ro`},
			{Name: "clock"},
		},
		Usage: &llmtest.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 60},
	}}})
	resp, raw := postMessages(t, newClient(t), srv.URL(), messagesBody("user", "weather"), nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Type != "message" || m.Role != "assistant" || m.Model != "test-model" || m.StopReason != "tool_use" || !strings.HasPrefix(m.ID, "msg_") {
		t.Errorf("message = %+v", m)
	}
	if len(m.Content) != 5 {
		t.Fatalf("content = %+v", m.Content)
	}
	c := m.Content
	if c[0].Type != "thinking" || c[0].Thinking != "Two calls." || c[0].Signature != llmtest.Sign("Two calls.") {
		t.Errorf("thinking block = %+v", c[0])
	}
	if c[1].Type != "text" || c[1].Text != "Checking." {
		t.Errorf("text block = %+v", c[1])
	}
	for i, want := range []struct{ id, input string }{
		{"toolu_0_1", `{"city":"Paris"}`}, {"toolu_mine", `"{\"city\": \"Ro"`}, {"toolu_0_3", `{}`},
	} {
		b := c[2+i]
		if b.Type != "tool_use" || b.ID != want.id || string(b.Input) != want.input {
			t.Errorf("tool_use block %d = %+v input %s, want id %s input %s", i, b, b.Input, want.id, want.input)
		}
	}
	if m.Usage.InputTokens != 40 || m.Usage.CacheReadInputTokens != 60 || m.Usage.OutputTokens != 20 {
		t.Errorf("usage = %+v, want input 40 (100 less 60 cached), cache read 60, output 20", m.Usage)
	}
}

func TestAnthropicStopReasons(t *testing.T) {
	for finish, want := range map[string]string{"": "end_turn", "stop": "end_turn", "length": "max_tokens", "content_filter": "refusal", "pause_turn": "pause_turn"} {
		srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "ok", FinishReason: finish}}})
		_, raw := postMessages(t, newClient(t), srv.URL(), messagesBody("user", "x"), nil)
		var m message
		if err := json.Unmarshal(raw, &m); err != nil || m.StopReason != want {
			t.Errorf("finish %q: stop_reason %q (%v), want %q", finish, m.StopReason, err, want)
		}
	}
}

// event is one parsed Anthropic server-sent event.
type event struct {
	name string
	data map[string]any
}

// anthropicEvents parses an Anthropic event stream, failing on any frame that is not
// "event: NAME\ndata: JSON" with NAME equal to the data's type.
func anthropicEvents(t *testing.T, body []byte) []event {
	t.Helper()
	text := string(body)
	if !strings.HasSuffix(text, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", text)
	}
	var out []event
	for frame := range strings.SplitSeq(strings.TrimSuffix(text, "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(frame, "\ndata: ")
		name, okName := strings.CutPrefix(name, "event: ")
		if !ok || !okName {
			t.Fatalf("malformed frame %q", frame)
		}
		var ev event
		ev.name = name
		if err := json.Unmarshal([]byte(data), &ev.data); err != nil {
			t.Fatalf("frame %q: %v", frame, err)
		}
		if ev.data["type"] != name {
			t.Errorf("event %q carries type %v", name, ev.data["type"])
		}
		out = append(out, ev)
	}
	return out
}

func TestAnthropicStream(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "stream", Turns: []llmtest.Turn{{
		Reasoning: "Let me think about it.",
		Content:   "The answer is forty two.",
		ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression":"6*7","précision":2}`}},
		Usage:     &llmtest.Usage{PromptTokens: 30, CompletionTokens: 9, CachedTokens: 10},
	}}})
	body := messagesBody("user", "stream")
	body["stream"] = true
	resp, raw := postMessages(t, newClient(t), srv.URL(), body, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := anthropicEvents(t, raw)
	var names []string
	blocks := map[int]*strings.Builder{}
	blockTypes := map[int]string{}
	var signature, stop string
	var output int
	for _, ev := range events {
		names = append(names, ev.name)
		switch ev.name {
		case "message_start":
			usage := ev.data["message"].(map[string]any)["usage"].(map[string]any)
			if usage["input_tokens"] != 20.0 || usage["cache_read_input_tokens"] != 10.0 {
				t.Errorf("message_start usage = %v", usage)
			}
		case "content_block_start":
			i := int(ev.data["index"].(float64))
			blocks[i] = &strings.Builder{}
			blockTypes[i] = ev.data["content_block"].(map[string]any)["type"].(string)
		case "content_block_delta":
			i := int(ev.data["index"].(float64))
			d := ev.data["delta"].(map[string]any)
			switch d["type"] {
			case "thinking_delta":
				blocks[i].WriteString(d["thinking"].(string))
			case "text_delta":
				blocks[i].WriteString(d["text"].(string))
			case "input_json_delta":
				blocks[i].WriteString(d["partial_json"].(string))
			case "signature_delta":
				signature = d["signature"].(string)
			}
		case "message_delta":
			stop = ev.data["delta"].(map[string]any)["stop_reason"].(string)
			output = int(ev.data["usage"].(map[string]any)["output_tokens"].(float64))
		}
	}
	if names[0] != "message_start" || names[1] != "ping" || names[len(names)-2] != "message_delta" || names[len(names)-1] != "message_stop" {
		t.Errorf("event order = %v", names)
	}
	if blockTypes[0] != "thinking" || blocks[0].String() != "Let me think about it." || signature != llmtest.Sign("Let me think about it.") {
		t.Errorf("thinking block %q %q signature %q", blockTypes[0], blocks[0], signature)
	}
	if blockTypes[1] != "text" || blocks[1].String() != "The answer is forty two." {
		t.Errorf("text block %q %q", blockTypes[1], blocks[1])
	}
	if blockTypes[2] != "tool_use" || blocks[2].String() != `{"expression":"6*7","précision":2}` {
		t.Errorf("tool_use block %q %q", blockTypes[2], blocks[2])
	}
	if stop != "tool_use" || output != 9 {
		t.Errorf("stop %q output %d", stop, output)
	}
	if n := strings.Count(string(raw), "input_json_delta"); n < 4 {
		t.Errorf("tool input in %d fragments, want several", n)
	}
}

func TestAnthropicFailureKinds(t *testing.T) {
	for _, tc := range []struct {
		failure    string
		stream     bool
		status     int
		typ        string
		retryAfter string
		contains   string
	}{
		{failure: llmtest.FailModelError, status: 500, typ: "api_error"},
		{failure: llmtest.FailAuthError, status: 401, typ: "authentication_error", contains: "x-api-key"},
		{failure: llmtest.FailQuotaExceeded, status: 400, typ: "invalid_request_error", contains: "credit balance is too low"},
		{failure: llmtest.FailOverloaded, status: 529, typ: "overloaded_error", contains: "Overloaded"},
		{failure: llmtest.FailBadRequest, status: 400, typ: "invalid_request_error", contains: "input_schema"},
		{failure: llmtest.FailRateLimit, status: 429, typ: "rate_limit_error", retryAfter: "3"},
		{failure: llmtest.FailInvalidResponse, status: 200},
		{failure: llmtest.FailInvalidResponse, stream: true, status: 200},
	} {
		t.Run(tc.failure, func(t *testing.T) {
			srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{
				Content: "recovered", Failure: tc.failure, FailuresBeforeSuccess: 1, RetryAfterMS: 2500,
			}}})
			client := newClient(t)
			body := messagesBody("user", "x")
			body["stream"] = tc.stream
			resp, raw := postMessages(t, client, srv.URL(), body, nil)
			wantStatus(t, resp, tc.status)
			if tc.typ == "" {
				if json.Valid(raw) {
					t.Errorf("body %q is valid JSON", raw)
				}
			} else {
				var e struct {
					Type  string `json:"type"`
					Error struct {
						Type    string `json:"type"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(raw, &e); err != nil || e.Type != "error" || e.Error.Type != tc.typ || !strings.Contains(e.Error.Message, tc.contains) {
					t.Errorf("error body %s, want type %s containing %q", raw, tc.typ, tc.contains)
				}
			}
			if resp.Header.Get("Retry-After") != tc.retryAfter || resp.Header.Get("retry-after-ms") != "" {
				t.Errorf("Retry-After %q retry-after-ms %q, want %q and none", resp.Header.Get("Retry-After"), resp.Header.Get("retry-after-ms"), tc.retryAfter)
			}
			resp, raw = postMessages(t, client, srv.URL(), messagesBody("user", "x"), nil)
			var m message
			if err := json.Unmarshal(raw, &m); err != nil || resp.StatusCode != 200 || m.Content[0].Text != "recovered" {
				t.Errorf("second attempt: %d %s", resp.StatusCode, raw)
			}
		})
	}
}

// toolTurn is a continuation after a tool call: the assistant message (its blocks) and the
// tool result.
func toolTurn(assistant ...map[string]any) map[string]any {
	blocks := make([]any, 0, len(assistant)+1)
	for _, b := range assistant {
		blocks = append(blocks, b)
	}
	blocks = append(blocks, map[string]any{"type": "tool_use", "id": "toolu_1", "name": "calc", "input": map[string]any{}})
	return map[string]any{
		"model": "m", "max_tokens": 4096, "thinking": map[string]any{"type": "enabled", "budget_tokens": 2048},
		"messages": []any{
			map[string]any{"role": "user", "content": "x"},
			map[string]any{"role": "assistant", "content": blocks},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}}},
		},
	}
}

func TestAnthropicRejectsWhatTheAPIRejects(t *testing.T) {
	signed := map[string]any{"type": "thinking", "thinking": "hmm", "signature": llmtest.Sign("hmm")}
	for _, tc := range []struct {
		name     string
		body     map[string]any
		noHeader bool
		want     string // "" means accepted
	}{
		{name: "valid continuation with the signed thinking block", body: toolTurn(signed)},
		{name: "redacted thinking also starts the message", body: toolTurn(map[string]any{"type": "redacted_thinking", "data": "opaque"})},
		{name: "no anthropic-version", body: messagesBody("user", "x"), noHeader: true, want: "anthropic-version: header is required"},
		{name: "no max_tokens", body: chatBody("user", "x"), want: "max_tokens: Field required"},
		{name: "system message in messages", body: messagesBody("system", "s", "user", "x"), want: "messages.0.role"},
		{name: "empty text block", body: map[string]any{"model": "m", "max_tokens": 10, "messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": ""}}}}}, want: "text content blocks must be non-empty"},
		{name: "empty content", body: messagesBody("user", ""), want: "must have non-empty content"},
		{name: "budget under 1024", body: map[string]any{"model": "m", "max_tokens": 4096, "thinking": map[string]any{"type": "enabled", "budget_tokens": 512},
			"messages": []any{map[string]any{"role": "user", "content": "x"}}}, want: "greater than or equal to 1024"},
		{name: "budget not below max_tokens", body: map[string]any{"model": "m", "max_tokens": 2048, "thinking": map[string]any{"type": "enabled", "budget_tokens": 2048},
			"messages": []any{map[string]any{"role": "user", "content": "x"}}}, want: "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{name: "tampered signature", body: toolTurn(map[string]any{"type": "thinking", "thinking": "hmm", "signature": "forged"}), want: "Invalid `signature`"},
		{name: "thinking block dropped", body: toolTurn(), want: "Expected `thinking` or `redacted_thinking`, but found `tool_use`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &fakeTB{TB: t}
			srv := llmtest.New(ft, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "a"}, {Content: "b"}}})
			header := http.Header{}
			if tc.noHeader {
				header["Anthropic-Version"] = []string{""}
			}
			resp, raw := postMessages(t, newClient(t), srv.URL(), tc.body, header)
			errs := strings.Join(ft.finish(), "\n")
			if tc.want == "" {
				if resp.StatusCode != http.StatusOK || errs != "" {
					t.Errorf("status %d body %s errors %q, want accepted", resp.StatusCode, raw, errs)
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), tc.want) || !strings.Contains(string(raw), `"invalid_request_error"`) {
				t.Errorf("status %d body %s, want 400 invalid_request_error with %q", resp.StatusCode, raw, tc.want)
			}
			if !strings.Contains(errs, "the Anthropic API would reject this request: ") || !strings.Contains(errs, tc.want) {
				t.Errorf("recorded errors %q lack %q", errs, tc.want)
			}
		})
	}
}

func TestAnthropicExpectations(t *testing.T) {
	// With thinking, the API takes only temperature 1 and tool_choice auto or none.
	budget, maxTokens, temp := 2048, 4096, 1.0
	expect := &llmtest.Expect{
		Tools: []string{"calc"}, ToolChoice: "auto", Temperature: &temp, MaxTokens: &maxTokens,
		ThinkingBudget: &budget, Stop: []string{"END"},
	}
	body := map[string]any{
		"model": "m", "max_tokens": 4096, "temperature": 1, "system": "Be brief.", "stop_sequences": []string{"END"},
		"tools":       []any{map[string]any{"name": "calc", "description": "d", "input_schema": map[string]any{"type": "object"}}},
		"tool_choice": map[string]any{"type": "auto"},
		"thinking":    map[string]any{"type": "enabled", "budget_tokens": 2048},
		"messages":    []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "x"}}}},
	}

	t.Run("met", func(t *testing.T) {
		ft := &fakeTB{TB: t}
		srv := llmtest.New(ft, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "ok", Expect: expect}}})
		resp, raw := postMessages(t, newClient(t), srv.URL(), body, nil)
		if errs := ft.finish(); resp.StatusCode != http.StatusOK || len(errs) != 0 {
			t.Errorf("status %d %s errors %q", resp.StatusCode, raw, errs)
		}
		got := srv.Requests()[0]
		if got.Path != "/v1/messages" || got.System != "Be brief." || got.ToolNames()[0] != "calc" || got.ToolChoiceName() != "auto" {
			t.Errorf("decoded request = %+v", got)
		}
	})

	t.Run("unmet", func(t *testing.T) {
		ft := &fakeTB{TB: t}
		srv := llmtest.New(ft, llmtest.Scenario{Name: "s", Match: "x", Turns: []llmtest.Turn{{Content: "ok", Expect: expect}}})
		unmet := map[string]any{"model": "m", "max_tokens": 8000, "tool_choice": map[string]any{"type": "tool", "name": "calc"},
			"tools":    []any{map[string]any{"name": "calc", "input_schema": map[string]any{"type": "object"}}},
			"messages": []any{map[string]any{"role": "user", "content": "x"}}}
		postMessages(t, newClient(t), srv.URL(), unmet, nil)
		errs := strings.Join(ft.finish(), "\n")
		for _, want := range []string{
			`tool_choice = "calc", want "auto"`, "temperature absent, want 1", "max_tokens = 8000, want 4096",
			"thinking is not enabled, want a budget of 2048 tokens", `stop sequences = [], want ["END"]`,
		} {
			if !strings.Contains(errs, want) {
				t.Errorf("errors %q lack %q", errs, want)
			}
		}
	})
}

func TestOpenAIExpectationsOfSampling(t *testing.T) {
	maxTokens := 128
	ft := &fakeTB{TB: t}
	srv := llmtest.New(ft, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "ok", Expect: &llmtest.Expect{
		MaxTokens: &maxTokens, ReasoningEffort: "high", Stop: []string{"END"},
	}}}})
	body := chatBody("user", "x")
	body["max_tokens"], body["reasoning_effort"], body["stop"] = 64, "low", []string{"STOP"}
	complete(t, newClient(t), srv.URL()+"/chat/completions", body)
	errs := strings.Join(ft.finish(), "\n")
	for _, want := range []string{"max_tokens = 64, want 128", `reasoning_effort = "low", want "high"`, `stop sequences = ["STOP"], want ["END"]`} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors %q lack %q", errs, want)
		}
	}
}

func TestAnthropicTurnSelection(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "first"}, {Content: "second"}}})
	body := toolTurn(map[string]any{"type": "thinking", "thinking": "t", "signature": llmtest.Sign("t")})
	resp, raw := postMessages(t, newClient(t), srv.URL(), body, nil)
	var m message
	if err := json.Unmarshal(raw, &m); err != nil || resp.StatusCode != 200 || m.Content[0].Text != "second" {
		t.Fatalf("status %d %s, want the second turn", resp.StatusCode, raw)
	}
	got := srv.Requests()[0]
	asst := got.Messages[1]
	if len(asst.Blocks) != 2 || asst.Blocks[1].Type != "tool_use" || asst.Blocks[1].ID != "toolu_1" {
		t.Errorf("assistant blocks = %+v", asst.Blocks)
	}
	if res := got.Messages[2].Blocks; len(res) != 1 || res[0].Type != "tool_result" || res[0].ToolUseID != "toolu_1" || res[0].Content != "42" {
		t.Errorf("tool result blocks = %+v", res)
	}
}

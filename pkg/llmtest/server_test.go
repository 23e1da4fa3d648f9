package llmtest_test

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// completion is the part of a chat completion body the tests read.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role             string                 `json:"role"`
			Content          *string                `json:"content"`
			ReasoningContent string                 `json:"reasoning_content"`
			ToolCalls        []llmtest.WireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// complete posts a chat completion request and decodes the successful answer.
func complete(t *testing.T, c *http.Client, url string, body any) completion {
	t.Helper()
	resp, data := post(t, c, url, body)
	return decodeCompletion(t, resp, data)
}

func decodeCompletion(t *testing.T, resp *http.Response, body []byte) completion {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if len(c.Choices) != 1 {
		t.Fatalf("choices = %d, want 1", len(c.Choices))
	}
	return c
}

func TestJSONAnswers(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Scenario{Name: "text", Match: "hello", Turns: []llmtest.Turn{{
			Content: "Hi there.", Reasoning: "The user greets me.",
			Usage: &llmtest.Usage{PromptTokens: 11, CompletionTokens: 3, CachedTokens: 5},
		}}},
		llmtest.Scenario{Name: "tools", Match: "add *", Turns: []llmtest.Turn{{
			ToolCalls: []llmtest.ToolCall{
				{Name: "calculator", Arguments: `{"expression":"1+2"}`},
				{ID: "mine", Name: "clock", Arguments: `{"tz":`},
			},
		}}},
	)
	client := newClient(t)

	t.Run("text with reasoning and usage", func(t *testing.T) {
		body := chatBody("system", "be nice", "user", "hello")
		body["temperature"] = 0.25
		c := complete(t, client, srv.URL()+"/chat/completions", body)
		ch := c.Choices[0]
		if c.Object != "chat.completion" || c.Model != "test-model" || !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Errorf("envelope = %+v", c)
		}
		if ch.Message.Role != "assistant" || ch.Message.Content == nil || *ch.Message.Content != "Hi there." {
			t.Errorf("message = %+v", ch.Message)
		}
		if ch.Message.ReasoningContent != "The user greets me." || ch.FinishReason != "stop" {
			t.Errorf("reasoning %q finish %q", ch.Message.ReasoningContent, ch.FinishReason)
		}
		if c.Usage.PromptTokens != 11 || c.Usage.CompletionTokens != 3 || c.Usage.TotalTokens != 14 ||
			c.Usage.PromptTokensDetails.CachedTokens != 5 {
			t.Errorf("usage = %+v", c.Usage)
		}
	})

	t.Run("tool calls", func(t *testing.T) {
		c := complete(t, client, srv.URL()+"/chat/completions", chatBody("user", "add one and two"))
		ch := c.Choices[0]
		if ch.FinishReason != "tool_calls" || ch.Message.Content != nil {
			t.Errorf("finish %q content %v, want tool_calls and null content", ch.FinishReason, ch.Message.Content)
		}
		want := []llmtest.WireToolCall{
			{ID: "call_0_1", Type: "function", Function: llmtest.WireFunction{Name: "calculator", Arguments: `{"expression":"1+2"}`}},
			{ID: "mine", Type: "function", Function: llmtest.WireFunction{Name: "clock", Arguments: `{"tz":`}},
		}
		if !slices.Equal(ch.Message.ToolCalls, want) {
			t.Errorf("tool calls = %+v, want %+v", ch.Message.ToolCalls, want)
		}
		if c.Usage.PromptTokens != 4 || c.Usage.CompletionTokens == 0 {
			t.Errorf("estimated usage = %+v, want prompt 4 (15 bytes / 4)", c.Usage)
		}
	})

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	first := reqs[0]
	if first.Path != "/v1/chat/completions" || first.Model != "test-model" || len(first.Messages) != 2 ||
		first.Messages[1].Content != "hello" {
		t.Errorf("recorded request = %+v", first)
	}
	if first.Temperature == nil || *first.Temperature != 0.25 || !first.Has("temperature") {
		t.Errorf("temperature = %v", first.Temperature)
	}
	if reqs[1].Temperature != nil || reqs[1].Has("temperature") || reqs[1].Has("top_p") {
		t.Errorf("second request should carry no sampling fields: %v", reqs[1].Raw)
	}
	if got := first.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("recorded header Content-Type = %q", got)
	}
}

func TestTurnSelectionByAssistantCount(t *testing.T) {
	ft := &fakeTB{TB: t}
	srv := llmtest.New(ft, llmtest.Scenario{Name: "two", Match: "go", Turns: []llmtest.Turn{
		{Content: "first"}, {Content: "second"},
	}})
	client := newClient(t)
	url := srv.URL() + "/chat/completions"

	for _, tc := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"no assistant message answers turn 0", chatBody("user", "go"), "first"},
		{"retry of turn 0 answers turn 0 again", chatBody("system", "x", "user", "go"), "first"},
		{"one assistant message answers turn 1", chatBody("user", "go", "assistant", "first", "user", "more"), "second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := complete(t, client, url, tc.body)
			if got := *c.Choices[0].Message.Content; got != tc.want {
				t.Errorf("content = %q, want %q", got, tc.want)
			}
		})
	}

	resp, body := post(t, client, url, chatBody("user", "go", "assistant", "a", "assistant", "b"))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "has 2 turns") {
		t.Errorf("past the last turn: status %d body %s", resp.StatusCode, body)
	}
	errs := ft.finish()
	if len(errs) != 1 || !strings.Contains(errs[0], `scenario "two" has 2 turns`) {
		t.Errorf("reported errors = %q", errs)
	}
}

func TestScenarioMatching(t *testing.T) {
	ft := &fakeTB{TB: t}
	srv := llmtest.New(ft,
		llmtest.Scenario{Name: "prefix", Match: "weather*", Turns: []llmtest.Turn{{Content: "from prefix"}}},
		llmtest.Scenario{Name: "exact", Match: "weather in Paris", Turns: []llmtest.Turn{{Content: "from exact"}}},
		llmtest.Scenario{Name: "parts", Match: "multi part", Turns: []llmtest.Turn{{Content: "from parts"}}},
	)
	client := newClient(t)
	url := srv.URL() + "/chat/completions"
	for _, tc := range []struct {
		first any
		want  string
	}{
		{"weather in Paris", "from exact"},
		{"weather in Rome", "from prefix"},
		{[]map[string]string{{"type": "text", "text": "multi "}, {"type": "text", "text": "part"}}, "from parts"},
	} {
		body := map[string]any{"model": "m", "messages": []map[string]any{{"role": "user", "content": tc.first}}}
		c := complete(t, client, url, body)
		if got := *c.Choices[0].Message.Content; got != tc.want {
			t.Errorf("first message %v: content = %q, want %q", tc.first, got, tc.want)
		}
	}

	resp, body := post(t, client, url, chatBody("user", "nothing matches"))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "no scenario matches") {
		t.Errorf("unmatched: status %d body %s", resp.StatusCode, body)
	}
	resp, _ = post(t, client, srv.URL()+"/completions", chatBody("user", "x"))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: status %d, want 404", resp.StatusCode)
	}
	errs := ft.finish()
	if len(errs) != 2 || !strings.Contains(errs[0], `"nothing matches"`) || !strings.Contains(errs[1], "/v1/completions") {
		t.Errorf("reported errors = %q", errs)
	}
}

func TestExpectations(t *testing.T) {
	temp, topP := 0.5, 0.9
	expect := &llmtest.Expect{Tools: []string{"b", "a"}, Temperature: &temp, TopP: &topP, ToolChoice: "required"}
	tools := []map[string]any{
		{"type": "function", "function": map[string]any{"name": "a", "parameters": map[string]any{"type": "object"}}},
		{"type": "function", "function": map[string]any{"name": "b"}},
	}

	t.Run("met", func(t *testing.T) {
		ft := &fakeTB{TB: t}
		srv := llmtest.New(ft, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "ok", Expect: expect}}})
		body := chatBody("user", "x")
		body["tools"], body["temperature"], body["top_p"], body["tool_choice"] = tools, 0.5, 0.9, "required"
		complete(t, newClient(t), srv.URL()+"/chat/completions", body)
		if errs := ft.finish(); len(errs) != 0 {
			t.Errorf("errors = %q, want none", errs)
		}
	})

	t.Run("unmet", func(t *testing.T) {
		ft := &fakeTB{TB: t}
		srv := llmtest.New(ft, llmtest.Scenario{Name: "s", Match: "x", Turns: []llmtest.Turn{{Content: "ok", Expect: expect}}})
		body := chatBody("user", "x")
		body["tools"], body["top_p"] = tools[:1], 0.1
		body["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": "a"}}
		c := complete(t, newClient(t), srv.URL()+"/chat/completions", body)
		if *c.Choices[0].Message.Content != "ok" {
			t.Error("a turn with unmet expectations must still answer")
		}
		errs := strings.Join(ft.finish(), "\n")
		for _, want := range []string{
			`scenario "s" turn 0: tools offered = [a], want [a b]`,
			"temperature absent, want 0.5",
			"top_p = 0.1, want 0.9",
			`tool_choice = "a", want "required"`,
		} {
			if !strings.Contains(errs, want) {
				t.Errorf("errors %q lack %q", errs, want)
			}
		}
	})

	t.Run("no tools expected", func(t *testing.T) {
		ft := &fakeTB{TB: t}
		srv := llmtest.New(ft, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "ok", Expect: &llmtest.Expect{Tools: []string{}}}}})
		body := chatBody("user", "x")
		body["tools"] = tools
		complete(t, newClient(t), srv.URL()+"/chat/completions", body)
		if errs := ft.finish(); len(errs) != 1 || !strings.Contains(errs[0], "tools offered = [a b], want []") {
			t.Errorf("errors = %q", errs)
		}
	})
}

func TestEmbeddings(t *testing.T) {
	srv := llmtest.New(t)
	client := newClient(t)
	var out struct {
		Object string `json:"object"`
		Model  string `json:"model"`
		Data   []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	resp, body := post(t, client, srv.URL()+"/embeddings", map[string]any{
		"model": "embed-1", "input": []string{"the cat sat", "The cat sat!", "quantum chromodynamics"},
	})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Object != "list" || out.Model != "embed-1" || len(out.Data) != 3 || out.Usage.PromptTokens == 0 {
		t.Fatalf("response = %s", body)
	}
	for i, d := range out.Data {
		if d.Index != i || len(d.Embedding) != llmtest.EmbeddingDims {
			t.Errorf("item %d: index %d dims %d", i, d.Index, len(d.Embedding))
		}
		var norm float64
		for _, x := range d.Embedding {
			norm += float64(x) * float64(x)
		}
		if math.Abs(norm-1) > 1e-5 {
			t.Errorf("item %d: norm² = %v, want 1", i, norm)
		}
	}
	if !slices.Equal(out.Data[0].Embedding, out.Data[1].Embedding) {
		t.Error("the same words must give the same vector")
	}
	if slices.Equal(out.Data[0].Embedding, out.Data[2].Embedding) {
		t.Error("different words gave the same vector")
	}
	if !slices.Equal(out.Data[0].Embedding, llmtest.Embed("the cat sat")) {
		t.Error("Embed disagrees with the server")
	}

	_, body = post(t, client, srv.URL()+"/embeddings", map[string]any{"model": "embed-1", "input": "one text"})
	if err := json.Unmarshal(body, &out); err != nil || len(out.Data) != 1 {
		t.Errorf("single string input: %s", body)
	}
	if got := srv.Requests()[1].Input; !slices.Equal(got, []string{"one text"}) {
		t.Errorf("recorded input = %q", got)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scenarios.yaml")
	yaml := `
- name: retry then call
  match: "find *"
  turns:
    - failure: rate_limit
      failures_before_success: 1
      retry_after_ms: 250
      expect:
        tools: [search]
        temperature: 0.2
      tool_calls:
        - name: search
          arguments: '{"q": "x"}'
    - content: done
      usage: {prompt_tokens: 10, completion_tokens: 2}
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	scenarios, err := llmtest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(scenarios) != 1 || len(scenarios[0].Turns) != 2 {
		t.Fatalf("scenarios = %+v", scenarios)
	}
	turn := scenarios[0].Turns[0]
	if turn.Failure != llmtest.FailRateLimit || turn.FailuresBeforeSuccess != 1 || turn.RetryAfterMS != 250 ||
		turn.Expect == nil || *turn.Expect.Temperature != 0.2 || turn.Expect.Tools[0] != "search" ||
		turn.ToolCalls[0].Arguments != `{"q": "x"}` {
		t.Errorf("turn 0 = %+v", turn)
	}
	if u := scenarios[0].Turns[1].Usage; u == nil || u.PromptTokens != 10 || u.CompletionTokens != 2 {
		t.Errorf("turn 1 usage = %+v", u)
	}

	if _, err := llmtest.Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: not a list"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := llmtest.Load(bad); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("Load of a malformed file: %v", err)
	}
}

func TestUnknownFailureKindFailsAtNew(t *testing.T) {
	ft := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		llmtest.New(ft, llmtest.Scenario{Name: "bad", Turns: []llmtest.Turn{{Failure: "explode"}}})
	}()
	<-done
	if errs := ft.finish(); len(errs) != 1 || !strings.Contains(errs[0], `unknown failure "explode"`) {
		t.Errorf("errors = %q", errs)
	}
}

func TestInvalidRequestBody(t *testing.T) {
	ft := &fakeTB{TB: t}
	srv := llmtest.New(ft)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader("{nope"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d, want 400", resp.StatusCode)
	}
	if errs := ft.finish(); len(errs) != 1 || !strings.Contains(errs[0], "not valid JSON") {
		t.Errorf("errors = %q", errs)
	}
}

// TestReportedModel: an answer reports the turn's Model, JSON and streamed, else the model
// asked for.
func TestReportedModel(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Scenario{Match: "alias", Turns: []llmtest.Turn{{Content: "ok", Model: "gpt-test-2025-01-01"}}},
		llmtest.Scenario{Match: "plain", Turns: []llmtest.Turn{{Content: "ok"}}},
	)
	client := newClient(t)
	if c := complete(t, client, srv.URL()+"/chat/completions", chatBody("user", "alias")); c.Model != "gpt-test-2025-01-01" {
		t.Errorf("model = %q, want the turn's gpt-test-2025-01-01", c.Model)
	}
	if c := complete(t, client, srv.URL()+"/chat/completions", chatBody("user", "plain")); c.Model != "test-model" {
		t.Errorf("model = %q, want the requested test-model", c.Model)
	}
	body := chatBody("user", "alias")
	body["stream"] = true
	resp, raw := post(t, client, srv.URL()+"/chat/completions", body)
	wantStatus(t, resp, http.StatusOK)
	for _, frame := range sseFrames(t, raw) {
		var chunk struct {
			Model string `json:"model"`
		}
		if frame != "[DONE]" && (json.Unmarshal([]byte(frame), &chunk) != nil || chunk.Model != "gpt-test-2025-01-01") {
			t.Errorf("chunk %s does not report gpt-test-2025-01-01", frame)
		}
	}
}

// TestReasoningModelsRefuseMaxTokens: as the OpenAI API does, max_tokens is refused with 400
// for the reasoning models, which take max_completion_tokens; other models take either.
func TestReasoningModelsRefuseMaxTokens(t *testing.T) {
	limit := 64
	for _, tc := range []struct {
		model, field string
		refused      bool
	}{
		{"o3-mini", "max_tokens", true},
		{"o1", "max_tokens", true},
		{"openai/gpt-5-mini", "max_tokens", true},
		{"o4-mini", "max_completion_tokens", false},
		{"gpt-5", "max_completion_tokens", false},
		{"gpt-4o", "max_tokens", false},
		{"gpt-4o", "max_completion_tokens", false},
		{"olmo-2", "max_tokens", false},
	} {
		t.Run(tc.model+"/"+tc.field, func(t *testing.T) {
			ft := &fakeTB{TB: t}
			srv := llmtest.New(ft, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "ok", Expect: &llmtest.Expect{}}}})
			body := chatBody("user", "x")
			body["model"], body[tc.field] = tc.model, limit
			resp, raw := post(t, newClient(t), srv.URL()+"/chat/completions", body)
			errs := ft.finish()
			if !tc.refused {
				wantStatus(t, resp, http.StatusOK)
				if len(errs) != 0 {
					t.Errorf("errors = %q, want none", errs)
				}
				return
			}
			wantStatus(t, resp, http.StatusBadRequest)
			wantErrorBody(t, raw, "invalid_request_error", "unsupported_parameter")
			if len(errs) != 1 || !strings.Contains(errs[0], "Use 'max_completion_tokens' instead") {
				t.Errorf("errors = %q, want the refusal", errs)
			}
		})
	}
	t.Run("expected max_completion_tokens", func(t *testing.T) {
		ft := &fakeTB{TB: t}
		srv := llmtest.New(ft, llmtest.Scenario{Match: "x", Turns: []llmtest.Turn{{Content: "ok", Expect: &llmtest.Expect{MaxCompletionTokens: &limit}}}})
		body := chatBody("user", "x")
		body["max_tokens"] = limit
		complete(t, newClient(t), srv.URL()+"/chat/completions", body)
		if errs := ft.finish(); len(errs) != 1 || !strings.Contains(errs[0], "max_completion_tokens absent, want 64") {
			t.Errorf("errors = %q", errs)
		}
	})
}

// TestRedirectAndRefusal: a turn can answer with a redirect (its status and Location), and
// with OpenAI's refusal: message.refusal beside content null, or delta.refusal fragments.
func TestRedirectAndRefusal(t *testing.T) {
	srv := llmtest.New(t,
		llmtest.Scenario{Match: "moved", Turns: []llmtest.Turn{{
			Redirect: "https://elsewhere.example/v1/chat/completions", RedirectStatus: http.StatusMovedPermanently,
		}}},
		llmtest.Scenario{Match: "moved again", Turns: []llmtest.Turn{{Redirect: "/v2/chat/completions"}}},
		llmtest.Scenario{Match: "refuse", Turns: []llmtest.Turn{{Refusal: "I can't help with that."}}},
	)
	client := newClient(t)
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		message, location string
		status            int
	}{
		{"moved", "https://elsewhere.example/v1/chat/completions", http.StatusMovedPermanently},
		{"moved again", "/v2/chat/completions", http.StatusTemporaryRedirect},
	} {
		resp, _ := post(t, client, srv.URL()+"/chat/completions", chatBody("user", tc.message))
		if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location {
			t.Errorf("%s: status %d Location %q, want %d %q", tc.message, resp.StatusCode,
				resp.Header.Get("Location"), tc.status, tc.location)
		}
	}

	resp, raw := post(t, client, srv.URL()+"/chat/completions", chatBody("user", "refuse"))
	var c struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal *string `json:"refusal"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || resp.StatusCode != http.StatusOK || len(c.Choices) != 1 {
		t.Fatalf("status %d body %s: %v", resp.StatusCode, raw, err)
	}
	m := c.Choices[0].Message
	if m.Content != nil || m.Refusal == nil || *m.Refusal != "I can't help with that." ||
		c.Choices[0].FinishReason != "stop" {
		t.Errorf("refusal answered as %s", raw)
	}

	body := chatBody("user", "refuse")
	body["stream"] = true
	_, raw = post(t, client, srv.URL()+"/chat/completions", body)
	var refusal strings.Builder
	for _, f := range sseFrames(t, raw) {
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
					Refusal string `json:"refusal"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if f == "[DONE]" || json.Unmarshal([]byte(f), &ch) != nil {
			continue
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != "" {
				t.Errorf("a refusal streamed content %q", c.Delta.Content)
			}
			refusal.WriteString(c.Delta.Refusal)
		}
	}
	if refusal.String() != "I can't help with that." {
		t.Errorf("streamed refusal %q", refusal.String())
	}
}

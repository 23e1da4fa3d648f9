package tokens_test

import (
	"strings"
	"sync"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/tokens"
)

func TestEncodingFor(t *testing.T) {
	table := []struct {
		model, want string
	}{
		{"gpt-4o", tokens.EncodingO200K},
		{"gpt-4o-mini-2024-07-18", tokens.EncodingO200K},
		{"chatgpt-4o-latest", tokens.EncodingO200K},
		{"gpt-4.1-nano", tokens.EncodingO200K},
		{"gpt-4.5-preview", tokens.EncodingO200K},
		{"gpt-5", tokens.EncodingO200K},
		{"gpt-5.1", tokens.EncodingO200K},
		{"gpt-oss-20b", tokens.EncodingO200K},
		{"gpt-oss:120b", tokens.EncodingO200K}, // Ollama tag
		{"o1", tokens.EncodingO200K},
		{"o3-mini", tokens.EncodingO200K},
		{"o4-mini-2025-04-16", tokens.EncodingO200K},
		{"openai/gpt-4o", tokens.EncodingO200K}, // OpenRouter
		{" GPT-4O ", tokens.EncodingO200K},
		{"gpt-4", tokens.EncodingCL100K},
		{"gpt-4-turbo", tokens.EncodingCL100K},
		{"gpt-4-32k-0613", tokens.EncodingCL100K},
		{"gpt-3.5-turbo", tokens.EncodingCL100K},
		{"gpt-3.5-turbo-instruct", tokens.EncodingCL100K},
		{"gpt-35-turbo", tokens.EncodingCL100K},
		{"text-embedding-3-small", tokens.EncodingCL100K},
		{"text-embedding-ada-002", tokens.EncodingCL100K},
		{"claude-sonnet-4", tokens.EncodingEstimate},
		{"llama3.1:8b", tokens.EncodingEstimate},
		{"rules", tokens.EncodingEstimate},
		{"o1pro", tokens.EncodingEstimate}, // not an o-series name
		{"gpt-40", tokens.EncodingEstimate},
		{"", tokens.EncodingEstimate},
	}
	for _, tc := range table {
		if got := tokens.EncodingFor(tc.model); got != tc.want {
			t.Errorf("EncodingFor(%q) = %q, want %q", tc.model, got, tc.want)
		}
		if got := tokens.ForModel(tc.model).Encoding(); got != tc.want {
			t.Errorf("ForModel(%q).Encoding() = %q, want %q", tc.model, got, tc.want)
		}
	}
}

// Token counts published by OpenAI (tiktoken's cookbook) and checked against tiktoken.
func TestBPEText(t *testing.T) {
	table := []struct {
		model, text   string
		cl100k, o200k int64
	}{
		{"empty", "", 0, 0},
		{"two words", "hello world", 2, 2},
		{"cookbook example", "tiktoken is great!", 6, 6},
		{"long word", "antidisestablishmentarianism", 6, 6},
		{"Japanese", "お誕生日おめでとう", 9, 8},
		{"special token text counts as text", "<|endoftext|>", 7, 7},
		{"sentence", "The quick brown fox jumps over the lazy dog.", 10, 10},
	}
	cl, o2 := tokens.ForModel("gpt-4"), tokens.ForModel("gpt-4o")
	for _, tc := range table {
		t.Run(tc.model, func(t *testing.T) {
			if got := cl.Text(tc.text); got != tc.cl100k {
				t.Errorf("cl100k_base: %q = %d tokens, want %d", tc.text, got, tc.cl100k)
			}
			if got := o2.Text(tc.text); got != tc.o200k {
				t.Errorf("o200k_base: %q = %d tokens, want %d", tc.text, got, tc.o200k)
			}
		})
	}
}

func TestEstimatorCounter(t *testing.T) {
	c := tokens.ForModel("claude-sonnet-4")
	if c != tokens.Estimator {
		t.Fatalf("ForModel(claude) = %v, want the Estimator", c)
	}
	for _, text := range []string{"", "a", "abcde", strings.Repeat("x", 401)} {
		if got, want := c.Text(text), tokens.Estimate(text); got != want {
			t.Errorf("Text(%q) = %d, want Estimate's %d", text, got, want)
		}
	}
}

// A BPE counter counts messages and tools like the estimate does, with its own text counts.
func TestBPEMessagesAndTools(t *testing.T) {
	c := tokens.ForModel("gpt-4o")
	msg := &typev1.Message{
		Role:      typev1.Role_ROLE_ASSISTANT,
		Content:   "hello world",                                                    // 2
		Reasoning: "tiktoken is great!",                                             // 6
		ToolCalls: []*typev1.ToolCall{{Name: "hello", RawArguments: "hello world"}}, // 1 + 2
	}
	if got, want := c.Message(msg), int64(tokens.MessageOverhead+2+6+1+2); got != want {
		t.Errorf("Message = %d, want %d", got, want)
	}
	if got, want := c.Messages([]*typev1.Message{msg, nil, msg}), 2*c.Message(msg); got != want {
		t.Errorf("Messages = %d, want %d", got, want)
	}
	if got := c.Message(nil); got != 0 {
		t.Errorf("Message(nil) = %d", got)
	}
	tool := &typev1.Tool{Name: "hello", Description: "hello world", InputSchema: mustStruct(t, map[string]any{"type": "object"})}
	want := c.Text("hello") + c.Text("hello world") + c.Text(`{"type":"object"}`)
	if got := c.Tools([]*typev1.Tool{tool}); got != want || got == tokens.Tools([]*typev1.Tool{tool}) {
		t.Errorf("Tools = %d, want %d (and unlike the estimate's %d)", got, want, tokens.Tools([]*typev1.Tool{tool}))
	}
}

// Counters are shared: loading and counting from many goroutines is safe and consistent.
func TestCounterConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := tokens.ForModel("gpt-4o-mini").Text("tiktoken is great!"); got != 6 {
				t.Errorf("got %d tokens, want 6", got)
			}
		})
	}
	wg.Wait()
}

// Long text is encoded in segments cut at word boundaries, which count exactly; a long run
// the tokenizer cannot split is cut, so counting it stays fast.
func TestBPELongText(t *testing.T) {
	c := tokens.ForModel("gpt-4o")
	sentence := "The quick brown fox jumps over the lazy dog. " // 10 tokens, then " " ends the text
	if got, want := c.Text(strings.Repeat(sentence, 2000)), int64(2000*10+1); got != want {
		t.Errorf("2000 sentences = %d tokens, want %d", got, want)
	}
	run := strings.Repeat("x", 1<<20)
	if got := c.Text(run); got < int64(len(run))/16 || got > int64(len(run)) {
		t.Errorf("a 1 MiB run of x = %d tokens, want between %d and %d", got, len(run)/16, len(run))
	}
	multi := strings.Repeat("é", 5000) // 2-byte characters are never cut in half
	if got := c.Text(multi); got < 1 || got > 5000 {
		t.Errorf("5000 é = %d tokens", got)
	}
	// Not UTF-8: no character boundary to cut at; counting still ends (it used to index
	// before the text's start and panic).
	broken := strings.Repeat("\x80", 4096)
	if got := c.Text(broken); got < 1 || got > int64(len(broken)) {
		t.Errorf("4096 continuation bytes = %d tokens", got)
	}
}

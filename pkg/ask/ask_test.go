package ask_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/ask"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/generation"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// verdict is the answer the tests ask for.
type verdict struct {
	Goal   string   `json:"goal"`
	Safe   bool     `json:"safe"`
	Labels []string `json:"labels"`
}

var verdictSchema = map[string]any{
	"type":                 "object",
	"required":             []any{"goal", "safe"},
	"additionalProperties": false,
	"properties": map[string]any{
		"goal":   map[string]any{"type": "string", "minLength": 1},
		"safe":   map[string]any{"type": "boolean"},
		"labels": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
	},
}

// TestObject asks the real generation service, over gRPC, to ask a scripted OpenAI-compatible
// model over HTTP: a call of the offered tool is the answer; text, another tool, arguments
// outside the schema and a failed provider are errors the caller can fall back on.
func TestObject(t *testing.T) {
	turn := func(m string, tt llmtest.Turn) llmtest.Scenario {
		return llmtest.Scenario{Name: m, Match: m, Turns: []llmtest.Turn{tt}}
	}
	call := func(name, args string) llmtest.Turn {
		return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: name, Arguments: args}}}
	}
	llm := llmtest.New(t,
		turn("good", call("submit_verdict", `{"goal": "book a flight", "safe": true, "labels": ["travel"]}`)),
		turn("text", llmtest.Turn{Content: "I think it is safe."}),
		turn("other tool", call("something_else", `{}`)),
		turn("outside the schema", call("submit_verdict", `{"goal": "", "safe": "yes"}`)),
		turn("down", llmtest.Turn{Failure: llmtest.FailModelError}),
		turn("thinks too long", llmtest.Turn{Reasoning: "Let me see", FinishReason: "length", Usage: &llmtest.Usage{PromptTokens: 40, CompletionTokens: 16}}),
	)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	svc := generation.New(generation.Options{Providers: map[string]generation.Provider{
		"scripted": generation.NewOpenAI(generation.OpenAIOptions{Name: "scripted", BaseURL: llm.URL(), APIKey: "k", HTTPClient: &http.Client{Transport: tr}}),
	}})
	m := &ask.Model{
		Client: generationv1.NewGenerationServiceClient(grpctest.Serve(t, svc.Register)),
		Target: &typev1.Target{Provider: "scripted", Model: "judge"},
	}
	question := func(input string) ask.Question {
		return ask.Question{RunID: "r1", Instructions: "Judge the request.", Input: input, Tool: "submit_verdict",
			Description: "Your verdict.", Schema: verdictSchema}
	}

	var v verdict
	ans, err := m.Object(t.Context(), question("good"), &v)
	if err != nil || v.Goal != "book a flight" || !v.Safe || len(v.Labels) != 1 || ans.Usage.GetTotal() == 0 {
		t.Fatalf("good: %+v %+v %v", v, ans, err)
	}
	if e := ans.Entry; e.GetType() != typev1.AccountingType_ACCOUNTING_TYPE_LLM || e.GetProvider() != "scripted" || e.GetModel() != "judge" ||
		e.GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK || e.GetTokens().GetTotal() != ans.Usage.GetTotal() || e.GetAttempts() != 1 {
		t.Errorf("good: accounting entry %v", e)
	}
	req := llm.Requests()[0]
	if len(req.Tools) != 1 || req.Tools[0].Function.Name != "submit_verdict" || string(req.ToolChoice) != `"required"` {
		t.Errorf("the request offered %+v with tool_choice %s, want only submit_verdict, required", req.Tools, req.ToolChoice)
	}
	for input, want := range map[string]string{
		"text":               "did not call submit_verdict",
		"other tool":         "did not call submit_verdict",
		"outside the schema": "do not match its schema",
	} {
		_, err := m.Object(t.Context(), question(input), &v)
		if !errors.Is(err, ask.ErrUnusable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrUnusable saying %q", input, err, want)
		}
	}
	// A schema that does not compile fails before any request, each time it is asked.
	asked := len(llm.Requests())
	bad := question("good")
	bad.Schema = map[string]any{"type": "object", "properties": map[string]any{"goal": map[string]any{"type": 5}}}
	for range 2 {
		ans, err := m.Object(t.Context(), bad, &v)
		if err == nil || errors.Is(err, ask.ErrUnusable) || !strings.Contains(err.Error(), "the schema of submit_verdict") || ans.Entry != nil {
			t.Errorf("a bad schema: %v (entry %v), want an error about the schema of submit_verdict and no request", err, ans.Entry)
		}
	}
	if n := len(llm.Requests()); n != asked {
		t.Errorf("a bad schema made %d requests, want none", n-asked)
	}
	ans, err = m.Object(t.Context(), question("down"), &v)
	if err == nil || errors.Is(err, ask.ErrUnusable) {
		t.Errorf("a failed provider: %v, want its stage error", err)
	}
	if e := ans.Entry; e.GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED || e.GetError() == "" || e.GetAttempts() != 1 {
		t.Errorf("a failed provider: accounting entry %v, want a failed request", e)
	}
	// An answer cut off before any content fails, but the provider answered and charged for
	// it: the failed request's entry carries its tokens.
	ans, err = m.Object(t.Context(), question("thinks too long"), &v)
	if se := stageerr.As(err); se == nil || se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED {
		t.Errorf("an answer cut off before any content: %v, want MAX_TOKENS_EXCEEDED", err)
	}
	if e := ans.Entry; e.GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED || e.GetTokens().GetTotal() != 56 || e.GetStopReason() != "length" {
		t.Errorf("an answer cut off before any content: accounting entry %v, want a failed request of the 56 tokens reported", e)
	}
}

// TestObjectFitsTheWindow: a question whose request (instructions, input, the tool) with the
// model's buffer and MaxOutputTokens of answer exceeds the model's ContextWindow, which its
// provider would refuse (HTTP 400), is asked with its input cut to fit, where no character is
// split, its start and end kept (its end alone with KeepEnd) and a note saying so; After is
// never cut. Only one that does not fit even with no input is not asked: ErrTooLong, naming
// the model and its window, and no request is made.
func TestObjectFitsTheWindow(t *testing.T) {
	llm := llmtest.New(t, llmtest.Scenario{Name: "any", Match: "*", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "submit_verdict", Arguments: `{"goal": "g", "safe": true}`}}},
	}})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	svc := generation.New(generation.Options{Providers: map[string]generation.Provider{
		"scripted": generation.NewOpenAI(generation.OpenAIOptions{Name: "scripted", BaseURL: llm.URL(), APIKey: "k", HTTPClient: &http.Client{Transport: tr}}),
	}})
	m := &ask.Model{
		Client: generationv1.NewGenerationServiceClient(grpctest.Serve(t, svc.Register)),
		Target: &typev1.Target{Provider: "scripted", Model: "judge"}, MaxOutputTokens: 200,
		ContextWindow: 1000, ContextWindowBufferTokens: 100,
	}
	q := ask.Question{RunID: "r1", Instructions: "Judge the request.", Tool: "submit_verdict",
		Description: "Your verdict.", Schema: verdictSchema, After: "\nTools: none."}
	var v verdict
	q.Input = "Book a flight."
	if _, err := m.Object(t.Context(), q, &v); err != nil || v.Goal != "g" {
		t.Fatalf("a short question: %+v %v", v, err)
	}
	if got := string(llm.Requests()[0].Messages[1].Content); got != "Book a flight.\nTools: none." {
		t.Errorf("a short question's input %q, want it whole with After", got)
	}
	// A long input is cut to fit, its start and end kept (its end with KeepEnd), After whole.
	long := "Bücher. " + strings.Repeat("Book a flight to somewhere warm, für mich. ", 300)
	for _, keepEnd := range []bool{false, true} {
		q.Input, q.KeepEnd = long, keepEnd
		if _, err := m.Object(t.Context(), q, &v); err != nil {
			t.Fatalf("a long question (keep end %v): %v", keepEnd, err)
		}
		reqs := llm.Requests()
		got := string(reqs[len(reqs)-1].Messages[1].Content)
		note := "[The middle of the input was cut to fit the model's context window: its first "
		if keepEnd {
			note = "[The input below was cut to fit the model's context window: its last "
		}
		before, after, ok := strings.Cut(got, note)
		if !ok || !strings.HasSuffix(got, "\nTools: none.") || !utf8.ValidString(got) {
			t.Fatalf("keep end %v: the input %q does not say it was cut, keep After or is not UTF-8", keepEnd, got)
		}
		_, kept, _ := strings.Cut(after, "]\n\n")
		kept = strings.TrimSuffix(kept, "\nTools: none.")
		if !keepEnd {
			// The start, then the end (TestObjectKeepsTheInputsLastWords).
			head := strings.TrimSuffix(before, "\n\n")
			if !strings.HasPrefix(long, head) || head == "" {
				t.Errorf("kept %q, not the input's start", head)
			}
			kept = head + kept
		}
		if kept == "" || len(kept) >= len(long) || keepEnd && !strings.HasSuffix(long, kept) {
			t.Errorf("keep end %v: kept %d of %d bytes", keepEnd, len(kept), len(long))
		}
		msgs := []*typev1.Message{{Content: "Judge the request."}, {Content: got}}
		if n := tokens.Messages(msgs); n > 1000-100-200 {
			t.Errorf("keep end %v: the messages hold %d tokens, over the %d the window leaves", keepEnd, n, 1000-100-200)
		}
	}
	// Instructions that do not fit with no input at all are not asked.
	q.Input, q.Instructions = "Book a flight.", strings.Repeat("Judge the request. ", 300)
	ans, err := m.Object(t.Context(), q, &v)
	if !errors.Is(err, ask.ErrTooLong) || ans.Entry != nil {
		t.Fatalf("long instructions: %v (entry %v), want ErrTooLong and no request", err, ans.Entry)
	}
	for _, want := range []string{"scripted/judge", "context window of 1000 tokens"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if n := len(llm.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (none for the long instructions)", n)
	}
}

// TestObjectAsksWithinTheModelsOutputLimit: a Model made WithLimits asks for at most the
// max_output_tokens configured for its model, whatever bound its stage sets (the memory
// stage's 2,048): a provider refuses max_tokens over the model's own limit (HTTP 400).
func TestObjectAsksWithinTheModelsOutputLimit(t *testing.T) {
	llm := llmtest.New(t, llmtest.Scenario{Name: "any", Match: "*", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "submit_verdict", Arguments: `{"goal": "g", "safe": true}`}}},
	}})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	svc := generation.New(generation.Options{Providers: map[string]generation.Provider{
		"scripted": generation.NewOpenAI(generation.OpenAIOptions{Name: "scripted", BaseURL: llm.URL(), APIKey: "k", HTTPClient: &http.Client{Transport: tr}}),
	}})
	cfg := config.Default()
	cfg.Providers = map[string]config.Provider{"scripted": {Type: "openai", BaseURL: llm.URL(), APIKey: "k",
		Models: map[string]config.Model{"judge": {MaxOutputTokens: 300}}}}
	m := (&ask.Model{
		Client: generationv1.NewGenerationServiceClient(grpctest.Serve(t, svc.Register)),
		Target: &typev1.Target{Provider: "scripted", Model: "judge"}, MaxOutputTokens: 2048,
	}).WithLimits(cfg)
	var v verdict
	if _, err := m.Object(t.Context(), ask.Question{RunID: "r1", Instructions: "Judge the request.", Input: "Book a flight.",
		Tool: "submit_verdict", Description: "Your verdict.", Schema: verdictSchema}, &v); err != nil {
		t.Fatal(err)
	}
	if got := llm.Requests()[0].MaxTokens; got == nil || *got != 300 {
		t.Errorf("max_tokens %s, want the model's max_output_tokens, 300", llm.Requests()[0].Raw["max_tokens"])
	}
}

// TestObjectLeavesRoomForTheAnswer: a question of a stage that sets no output bound (the
// intent and planning stages' MaxOutputTokens is 0: the provider's default) fits the window
// with room for the model's configured max_output_tokens (OutputLimit) of answer. It reserved
// none, so an input cut to fit filled the window but for its buffer, and the model had no room
// left to answer in (or its provider refused a max_tokens past the window).
func TestObjectLeavesRoomForTheAnswer(t *testing.T) {
	llm := llmtest.New(t, llmtest.Scenario{Name: "any", Match: "*", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "submit_verdict", Arguments: `{"goal": "g", "safe": true}`}}},
	}})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	svc := generation.New(generation.Options{Providers: map[string]generation.Provider{
		"scripted": generation.NewOpenAI(generation.OpenAIOptions{Name: "scripted", BaseURL: llm.URL(), APIKey: "k", HTTPClient: &http.Client{Transport: tr}}),
	}})
	m := &ask.Model{
		Client:        generationv1.NewGenerationServiceClient(grpctest.Serve(t, svc.Register)),
		Target:        &typev1.Target{Provider: "scripted", Model: "judge"},
		ContextWindow: 1000, ContextWindowBufferTokens: 100, OutputLimit: 300,
	}
	var v verdict
	q := ask.Question{RunID: "r1", Instructions: "Judge the request.", Tool: "submit_verdict",
		Description: "Your verdict.", Schema: verdictSchema,
		Input: strings.Repeat("Book a flight to somewhere warm. ", 300)}
	if _, err := m.Object(t.Context(), q, &v); err != nil {
		t.Fatal(err)
	}
	params, err := structpb.NewStruct(verdictSchema)
	if err != nil {
		t.Fatal(err)
	}
	sent := llm.Requests()[0]
	msgs := []*typev1.Message{{Content: string(sent.Messages[0].Content)}, {Content: string(sent.Messages[1].Content)}}
	tool := &typev1.Tool{Name: "submit_verdict", Description: "Your verdict.", InputSchema: params}
	if need := tokens.Messages(msgs) + tokens.Tools([]*typev1.Tool{tool}); need > 1000-100-300 {
		t.Errorf("the request holds %d tokens: with the buffer of 100 it leaves %d of the window of 1000 "+
			"for the answer, under the model's max_output_tokens of 300", need, 1000-100-need)
	}
}

// TestObjectKeepsTheInputsLastWords: an input cut to fit keeps its end as well as its start,
// with the note between them, so that an instruction after pasted text ("<document> ...
// summarise this") reaches the model; the input's start alone was kept.
func TestObjectKeepsTheInputsLastWords(t *testing.T) {
	llm := llmtest.New(t, llmtest.Scenario{Name: "any", Match: "*", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "submit_verdict",
			Arguments: `{"goal": "g", "safe": true}`}}},
	}})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	svc := generation.New(generation.Options{Providers: map[string]generation.Provider{
		"scripted": generation.NewOpenAI(generation.OpenAIOptions{
			Name: "scripted", BaseURL: llm.URL(), APIKey: "k",
			HTTPClient: &http.Client{Transport: tr},
		}),
	}})
	m := &ask.Model{
		Client: generationv1.NewGenerationServiceClient(grpctest.Serve(t, svc.Register)),
		Target: &typev1.Target{Provider: "scripted", Model: "judge"}, MaxOutputTokens: 200,
		ContextWindow: 1000, ContextWindowBufferTokens: 100,
	}
	const opening = "<document>\nThe report, für alle. "
	const instruction = "</document>\nSummarise this in one sentence."
	input := opening + strings.Repeat("Quarterly revenue grew in every region. ", 300) + instruction
	q := ask.Question{RunID: "r1", Instructions: "Judge the request.", Tool: "submit_verdict",
		Description: "Your verdict.", Schema: verdictSchema, Input: input, After: "\nTools: none."}
	var v verdict
	if _, err := m.Object(t.Context(), q, &v); err != nil {
		t.Fatal(err)
	}
	got := string(llm.Requests()[0].Messages[1].Content)
	const note = "[The middle of the input was cut to fit the model's context window: its first "
	head, tail, ok := strings.Cut(got, note)
	if !ok || !utf8.ValidString(got) {
		t.Fatalf("the input %q does not say its middle was cut, or is not UTF-8", got)
	}
	_, tail, _ = strings.Cut(tail, "]\n\n")
	tail = strings.TrimSuffix(tail, "\nTools: none.")
	head = strings.TrimSuffix(head, "\n\n")
	if !strings.HasPrefix(head, opening) || !strings.HasPrefix(input, head) ||
		!strings.HasSuffix(tail, instruction) ||
		!strings.HasSuffix(input, tail) || len(head)+len(tail) >= len(input) {
		t.Errorf("kept %q ... %q, want the input's start and end, its middle left out", head, tail)
	}
}

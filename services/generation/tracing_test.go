package generation_test

import (
	"context"
	"log/slog"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/services/generation"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// attrs indexes a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		out[kv.Key] = kv.Value
	}
	return out
}

func TestChatSpans(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{
		{Content: "ok", Usage: &llmtest.Usage{PromptTokens: 12, CompletionTokens: 3, CachedTokens: 8}},
		{Failure: llmtest.FailRateLimit, RetryAfterMS: 1000},
	}})
	tp, rec := recorder(t)
	client := serve(t, generation.Options{
		Providers:      map[string]generation.Provider{"local": openAIAt(t, srv.URL(), func(o *generation.OpenAIOptions) { o.Name = "ollama" })},
		TracerProvider: tp,
	})

	req := request("local", "llama3", user("hi"))
	req.Sampling = &generationv1.Sampling{Temperature: ptr(0.2), MaxOutputTokens: 64}
	if _, err := client.Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("spans = %d, want 1", len(spans))
	}
	s := spans[0]
	if s.Name() != "chat llama3" || s.SpanKind() != trace.SpanKindClient || s.Status().Code == codes.Error {
		t.Errorf("span %q kind %v status %v", s.Name(), s.SpanKind(), s.Status())
	}
	a := attrs(s)
	for key, want := range map[attribute.Key]any{
		"gen_ai.operation.name":                "chat",
		"gen_ai.provider.name":                 "ollama",
		"gen_ai.request.model":                 "llama3",
		"gen_ai.response.model":                "llama3",
		"gen_ai.usage.input_tokens":            int64(12),
		"gen_ai.usage.output_tokens":           int64(3),
		"gen_ai.usage.cache_read.input_tokens": int64(8),
		"gen_ai.request.temperature":           0.2,
		"gen_ai.request.max_tokens":            int64(64),
		"gen_ai.request.stream":                false,
		"agentmesh.run.id":                     "run-1",
	} {
		if got := a[key].AsInterface(); got != want {
			t.Errorf("%s = %v (%T), want %v", key, got, got, want)
		}
	}
	if got := a["gen_ai.response.finish_reasons"].AsStringSlice(); len(got) != 1 || got[0] != "stop" {
		t.Errorf("finish reasons = %v", got)
	}
	if _, ok := a["gen_ai.request.top_p"]; ok {
		t.Error("top_p recorded although unset")
	}

	req.Messages = append(req.Messages, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "ok"}, user("again"))
	_, err := client.Generate(t.Context(), req)
	stageError(t, err, grpccodes.ResourceExhausted)
	spans = rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("spans = %d, want 2", len(spans))
	}
	failed := spans[1]
	if failed.Status().Code != codes.Error || attrs(failed)["error.type"].AsString() != "RATE_LIMITED" {
		t.Errorf("failed span status %v error.type %v", failed.Status(), attrs(failed)["error.type"])
	}
	if len(failed.Events()) == 0 || failed.Events()[0].Name != "exception" {
		t.Errorf("the error must be recorded as an event: %v", failed.Events())
	}
}

func TestStreamAndEmbedSpans(t *testing.T) {
	tp, rec := recorder(t)
	client := serve(t, generation.Options{
		Providers:      map[string]generation.Provider{"rules": generation.NewRules()},
		TracerProvider: tp,
	})
	req := request("rules", "rules-v1", user("hello"))
	req.Sampling = &generationv1.Sampling{MaxOutputTokens: 1}
	if _, _, err := streamAll(t, client, req); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Embed(t.Context(), &generationv1.EmbedRequest{Target: &typev1.Target{Provider: "rules", Model: "hash"}, Inputs: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("spans = %d, want 2", len(spans))
	}
	if a := attrs(spans[0]); spans[0].Name() != "chat rules-v1" || a["gen_ai.request.stream"].AsBool() != true || a["gen_ai.provider.name"].AsString() != "rules" {
		t.Errorf("stream span %q %v", spans[0].Name(), spans[0].Attributes())
	}
	if a := attrs(spans[1]); spans[1].Name() != "embeddings hash" || a["gen_ai.operation.name"].AsString() != "embeddings" ||
		spans[1].SpanKind() != trace.SpanKindClient {
		t.Errorf("embed span %q %v", spans[1].Name(), spans[1].Attributes())
	}
}

func TestMaxTokensSpanError(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{FinishReason: "length"}}})
	tp, rec := recorder(t)
	client := serve(t, generation.Options{
		Providers:      map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)},
		TracerProvider: tp,
	})
	_, err := client.Generate(t.Context(), request("openai", "gpt-test", user("x")))
	stageError(t, err, grpccodes.ResourceExhausted)
	s := rec.Ended()[0]
	if attrs(s)["error.type"].AsString() != "MAX_TOKENS_EXCEEDED" || attrs(s)["gen_ai.response.finish_reasons"].AsStringSlice()[0] != "length" {
		t.Errorf("span attributes %v", s.Attributes())
	}
}

// panicking is a provider of Go code that panics on every call.
type panicking struct{}

func (panicking) Name() string { return "panicking" }
func (panicking) Complete(context.Context, *generation.Request) (*generation.Response, error) {
	panic("provider bug")
}
func (panicking) Stream(context.Context, *generation.Request, func(*generationv1.Delta) error) (*generation.Response, error) {
	panic("provider bug")
}
func (panicking) Embed(context.Context, string, []string) (*generation.Embeddings, error) {
	panic("provider bug")
}

// TestAProviderPanicEndsItsSpan: a provider that panics fails the call with INTERNAL (the
// server recovers the panic), and its chat or embeddings span ends with status Error and
// error.type; the span never ended, so the call was missing from its trace.
func TestAProviderPanicEndsItsSpan(t *testing.T) {
	tp, rec := recorder(t)
	p, err := server.NewInProcess(server.Options{Name: "generation", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	generation.New(generation.Options{Providers: map[string]generation.Provider{"bad": panicking{}}, TracerProvider: tp}).Register(p)
	t.Cleanup(func() { p.Shutdown(context.WithoutCancel(t.Context())) })
	client := generationv1.NewGenerationServiceClient(dial.InProcess(p.Channel()))

	req := request("bad", "m", user("x"))
	if _, err := client.Generate(t.Context(), req); status.Code(err) != grpccodes.Internal {
		t.Fatalf("Generate: %v, want INTERNAL", err)
	}
	if _, _, err := streamAll(t, client, request("bad", "m", user("x"))); status.Code(err) != grpccodes.Internal {
		t.Fatalf("GenerateStream: %v, want INTERNAL", err)
	}
	if _, err := client.Embed(t.Context(), &generationv1.EmbedRequest{Target: req.GetTarget(), Inputs: []string{"x"}}); status.Code(err) != grpccodes.Internal {
		t.Fatalf("Embed: %v, want INTERNAL", err)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans ended, want 3 (chat, chat, embeddings)", len(spans))
	}
	for _, s := range spans {
		if s.Status().Code != codes.Error || attrs(s)["error.type"].AsString() == "" {
			t.Errorf("span %q: status %v, error.type %q; want Error with an error.type", s.Name(), s.Status(), attrs(s)["error.type"].AsString())
		}
	}
}

// TestCachedAnswerSpan: an answer from the response cache (use_cache) has a chat span too, of
// internal kind (no provider is called) with agentmesh.generation.cached, the request's and
// the answer's model and finish reason and no usage; a cache hit made no span, so a run's
// trace showed no model answering its turn.
func TestCachedAnswerSpan(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{
		{Content: "ok", Usage: &llmtest.Usage{PromptTokens: 12, CompletionTokens: 3}},
	}})
	tp, rec := recorder(t)
	client := serve(t, generation.Options{
		Providers:      map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)},
		TracerProvider: tp,
	})
	req := request("openai", "gpt-test", user("hi"))
	req.UseCache = true
	for range 2 {
		if _, err := client.Generate(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if _, final, err := streamAll(t, client, req); err != nil || !final.GetCached() {
		t.Fatalf("stream: cached %v, %v; want the cached answer", final.GetCached(), err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("provider requests = %d, want 1", n)
	}
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("spans = %d, want 3", len(spans))
	}
	first := spans[0]
	cached := attrs(first)["agentmesh.generation.cached"].AsBool()
	if first.SpanKind() != trace.SpanKindClient || cached {
		t.Errorf("the provider's answer: span kind %v, %v", first.SpanKind(), first.Attributes())
	}
	for i, stream := range map[int]bool{1: false, 2: true} {
		s, a := spans[i], attrs(spans[i])
		if s.Name() != "chat gpt-test" || s.SpanKind() != trace.SpanKindInternal ||
			s.Status().Code == codes.Error {
			t.Errorf("cached answer %d: span %q kind %v status %v",
				i, s.Name(), s.SpanKind(), s.Status())
		}
		for key, want := range map[attribute.Key]attribute.Value{
			"agentmesh.generation.cached":    attribute.BoolValue(true),
			"gen_ai.operation.name":          attribute.StringValue("chat"),
			"gen_ai.provider.name":           attribute.StringValue("openai"),
			"gen_ai.request.model":           attribute.StringValue("gpt-test"),
			"gen_ai.request.stream":          attribute.BoolValue(stream),
			"gen_ai.response.model":          attribute.StringValue("gpt-test"),
			"gen_ai.response.finish_reasons": attribute.StringSliceValue([]string{"stop"}),
		} {
			if a[key] != want {
				t.Errorf("cached answer %d: %s = %v, want %v", i, key, a[key].Emit(), want.Emit())
			}
		}
		if _, ok := a["gen_ai.usage.input_tokens"]; ok {
			t.Errorf("cached answer %d: usage %v, want none (no provider call)", i, s.Attributes())
		}
	}
}

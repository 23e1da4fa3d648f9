package generation_test

import (
	"context"
	"strings"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// cachedClient serves the service with an OpenAI provider on a server answering "cached
// answer" to anything, and the given cache size.
func cachedClient(t *testing.T, size int) (generationv1.GenerationServiceClient, *llmtest.Server) {
	t.Helper()
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "cached answer"}}})
	client := serve(t, generation.Options{
		Providers: map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)},
		CacheSize: size,
	})
	return client, srv
}

func cacheable(text string) *generationv1.GenerateRequest {
	req := request("openai", "gpt-test", user(text))
	req.UseCache = true
	return req
}

func TestCacheHit(t *testing.T) {
	client, srv := cachedClient(t, 0)
	first, err := client.Generate(t.Context(), cacheable("same question"))
	if err != nil {
		t.Fatal(err)
	}
	again := cacheable("same question")
	again.RunId = "another-run"
	second, err := client.Generate(t.Context(), again)
	if err != nil {
		t.Fatal(err)
	}
	if first.GetCached() || !second.GetCached() {
		t.Errorf("cached = %v then %v, want false then true", first.GetCached(), second.GetCached())
	}
	if second.GetContent() != first.GetContent() || second.GetProvider() != "openai" {
		t.Errorf("cached answer = %v", second)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("provider saw %d requests, want 1", n)
	}

	different := cacheable("same question")
	different.Sampling = &generationv1.Sampling{Temperature: ptr(0.3)}
	if resp, err := client.Generate(t.Context(), different); err != nil || resp.GetCached() {
		t.Errorf("other sampling must miss: %v %v", resp, err)
	}
	uncached := cacheable("same question")
	uncached.UseCache = false
	if resp, err := client.Generate(t.Context(), uncached); err != nil || resp.GetCached() {
		t.Errorf("use_cache=false must call the provider: %v %v", resp, err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("provider saw %d requests, want 3", n)
	}
}

// TestCacheStreaming: a streamed miss streams its deltas as any stream does and stores its
// answer, which a later call, streamed or not, gets from the cache; a streamed hit sends only
// the final answer.
func TestCacheStreaming(t *testing.T) {
	client, srv := cachedClient(t, 0)
	deltas, final, err := streamAll(t, client, cacheable("streamed"))
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) == 0 || final.GetCached() {
		t.Fatalf("a streamed miss must stream: %d deltas, cached %v", len(deltas), final.GetCached())
	}
	resp, err := client.Generate(t.Context(), cacheable("streamed"))
	if err != nil || !resp.GetCached() || resp.GetContent() != "cached answer" {
		t.Fatalf("a streamed answer must be stored: %v %v", resp, err)
	}
	deltas, final, err = streamAll(t, client, cacheable("streamed"))
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) != 0 || !final.GetCached() || final.GetContent() != "cached answer" {
		t.Errorf("a cache hit must send only the final answer: %d deltas, final %v", len(deltas), final)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("provider saw %d requests, want 1", n)
	}
}

// TestCacheSkipsFilteredStreamedAnswers: a streamed answer the content filter stopped is not
// stored, as a non-streamed one is not: the same request later gets a fresh attempt.
func TestCacheSkipsFilteredStreamedAnswers(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "Here is how to", FinishReason: "content_filter"}}})
	client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)})
	for range 2 {
		_, final, err := streamAll(t, client, cacheable("x"))
		if err != nil || final.GetCached() || final.GetStopReason() != "content_filter" {
			t.Fatalf("final %v err %v", final, err)
		}
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("provider saw %d requests, want 2: filtered answers are not cached", n)
	}
}

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	client, srv := cachedClient(t, 2)
	for _, q := range []string{"a", "b", "a", "c", "a", "b"} {
		if _, err := client.Generate(t.Context(), cacheable(q)); err != nil {
			t.Fatal(err)
		}
	}
	// a miss, b miss, a hit, c miss (evicts b), a hit, b miss
	if n := len(srv.Requests()); n != 4 {
		t.Errorf("provider saw %d requests, want 4", n)
	}
}

func TestCacheSkipsEmptyAnswers(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{}}})
	client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)})
	for range 2 {
		resp, err := client.Generate(t.Context(), cacheable("x"))
		if err != nil || resp.GetCached() || resp.GetType() != generationv1.ResponseType_RESPONSE_TYPE_DONE {
			t.Fatalf("resp %v err %v", resp, err)
		}
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("provider saw %d requests, want 2: empty answers are not cached", n)
	}
}

// TestCacheSkipsFilteredAnswers: an answer the provider's content filter stopped
// (finish_reason content_filter), with part of it delivered or none, is no more served again
// than an empty one: it is not the model's answer, which the caller asks for again, and the
// same request later gets a fresh attempt instead of the filtered answer from the cache.
func TestCacheSkipsFilteredAnswers(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "Here is how to", FinishReason: "content_filter"}}})
	client := serveProviders(t, map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)})
	for range 2 {
		resp, err := client.Generate(t.Context(), cacheable("x"))
		if err != nil || resp.GetCached() || resp.GetStopReason() != "content_filter" {
			t.Fatalf("resp %v err %v", resp, err)
		}
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("provider saw %d requests, want 2: filtered answers are not cached", n)
	}
}

// TestCacheKeepsUsersApart: the cache is keyed by the user the call acts for (its
// agentmesh-user metadata) too. Another user's identical request is a miss, which neither
// shows that the request was sent before nor serves one user's answer to another, while the
// user who sent it first gets its own entry back.
func TestCacheKeepsUsersApart(t *testing.T) {
	client, srv := cachedClient(t, 0)
	alice := auth.OutgoingUser(t.Context(), "acme/alice")
	bob := auth.OutgoingUser(t.Context(), "globex/bob")
	ask := func(ctx context.Context) (*generationv1.GenerateResponse, error) {
		return client.Generate(ctx, cacheable("same question"))
	}
	if resp, err := ask(alice); err != nil || resp.GetCached() {
		t.Fatalf("alice's first call: %v %v, want a miss", resp, err)
	}
	if resp, err := ask(bob); err != nil || resp.GetCached() {
		t.Errorf("bob's identical call: %v %v, want a miss: alice's entry is hers", resp, err)
	}
	streamed := &generationv1.GenerateStreamRequest{Request: cacheable("same question")}
	if _, final, err := streamWith(t, bob, client, streamed); err != nil || !final.GetCached() {
		t.Errorf("bob's second call (streamed): %v %v, want a hit of his own entry", final, err)
	}
	if resp, err := ask(alice); err != nil || !resp.GetCached() {
		t.Errorf("alice's second call: %v %v, want a hit of her own entry", resp, err)
	}
	if resp, err := ask(t.Context()); err != nil || resp.GetCached() {
		t.Errorf("a call for no user: %v %v, want a miss", resp, err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("provider saw %d requests, want 3 (alice, bob, nobody)", n)
	}
	twice := metadata.AppendToOutgoingContext(alice, auth.UserMetadata, "globex/bob")
	_, err := ask(twice)
	if status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(status.Convert(err).Message(), "use_cache") {
		t.Errorf("a call naming two users: %v, want INVALID_ARGUMENT naming use_cache", err)
	}
}

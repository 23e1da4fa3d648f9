package memory_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc"
)

// synonyms map words to the concept an embedding model would place them near.
var synonyms = map[string]string{"automobile": "car", "vehicle": "car", "canine": "dog", "puppy": "dog"}

// embedDims is the length of the test vectors.
const embedDims = 64

// functionWords carry no meaning for the test embedder.
var functionWords = map[string]bool{
	"a": true, "about": true, "are": true, "do": true, "i": true, "in": true, "is": true,
	"me": true, "mine": true, "my": true, "tell": true, "the": true, "to": true, "which": true,
}

// hashEmbed is a deterministic bag-of-words vector: each lower-cased word that is not a
// function word adds 1 to one of embedDims buckets chosen by its FNV-1a hash; the vector is
// L2-normalised.
func hashEmbed(text string) []float32 {
	v := make([]float32, embedDims)
	for _, w := range strings.Fields(strings.ToLower(text)) {
		if w = strings.Trim(w, ".,?!"); functionWords[w] {
			continue
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		v[h.Sum32()%embedDims]++
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm == 0 {
		return v
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(norm))
	}
	return v
}

// conceptEmbedder embeds like a model that knows synonyms: words are replaced by their
// concept, then hashed by hashEmbed. It counts its calls and fails while failing is set.
type conceptEmbedder struct {
	calls   atomic.Int32
	failing atomic.Bool
}

func (e *conceptEmbedder) Embed(_ context.Context, texts []string) ([][]float32, *typev1.AccountingEntry, error) {
	e.calls.Add(1)
	if e.failing.Load() {
		return nil, nil, errors.New("embedding model overloaded")
	}
	out := make([][]float32, len(texts))
	for i, text := range texts {
		words := strings.Fields(strings.ToLower(text))
		for j, w := range words {
			if c, ok := synonyms[strings.Trim(w, ".,?!")]; ok {
				words[j] = c
			}
		}
		out[i] = hashEmbed(strings.Join(words, " "))
	}
	return out, nil, nil
}

// captureLogs sends the default logger to a buffer until the test ends; call it before
// building the service, which takes its logger from the default.
func captureLogs(t *testing.T) *logtest.Buffer {
	t.Helper()
	buf := &logtest.Buffer{}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return buf
}

func searchIDs(t *testing.T, c memoryv1.MemoryServiceClient, userID, query string) []*memoryv1.MemoryHit {
	t.Helper()
	resp, err := c.Search(t.Context(), &memoryv1.SearchRequest{UserId: userID, Query: query})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetHits()
}

// With an embedder, a memory is found by meaning even when it shares no word with the query.
func TestSemanticSearch(t *testing.T) {
	emb := &conceptEmbedder{}
	semantic := newClient(t, memory.Options{Embedder: emb})
	lexical := newClient(t, memory.Options{})
	texts := []string{"I drive a red car to work", "My dog loves the park", "Quarterly taxes are due in April"}
	ids := make(map[string]string)
	for _, text := range texts {
		ids[text] = store(t, semantic, "u", "", text)
		store(t, lexical, "u", "", text)
	}
	if got := emb.calls.Load(); got != int32(len(texts)) {
		t.Errorf("embedder called %d times for %d stores", got, len(texts))
	}

	table := []struct{ query, want string }{
		{"Which automobile is mine?", "I drive a red car to work"},
		{"Tell me about the puppy", "My dog loves the park"},
	}
	for _, tc := range table {
		t.Run(tc.query, func(t *testing.T) {
			if hits := searchIDs(t, lexical, "u", tc.query); len(hits) != 0 && hits[0].GetMemory().GetContent() == tc.want {
				t.Fatalf("BM25 already finds %q: the case proves nothing", tc.want)
			}
			hits := searchIDs(t, semantic, "u", tc.query)
			if len(hits) == 0 || hits[0].GetMemory().GetId() != ids[tc.want] {
				t.Fatalf("hits = %v, want %q first", hits, tc.want)
			}
			if s := hits[0].GetRelevanceScore(); s <= 0 || s > 1 {
				t.Errorf("score %v outside (0, 1]", s)
			}
		})
	}
	t.Run("other users' memories stay out", func(t *testing.T) {
		if hits := searchIDs(t, semantic, "someone-else", "Which automobile is mine?"); len(hits) != 0 {
			t.Errorf("hits = %v", hits)
		}
	})
}

// An embedder failure never fails a Store or a Search: the memory is kept without a vector
// and the search ranks with BM25; both say so in the log.
func TestEmbedderFailure(t *testing.T) {
	logs := captureLogs(t)
	emb := &conceptEmbedder{}
	c := newClient(t, memory.Options{Embedder: emb})
	emb.failing.Store(true)
	id := store(t, c, "u", "", "The car is parked on level 3")
	if !strings.Contains(logs.String(), "embedding failed, storing the memory without a vector") || !strings.Contains(logs.String(), "embedding model overloaded") {
		t.Errorf("store log = %s", logs)
	}

	hits := searchIDs(t, c, "u", "where is the car parked")
	if len(hits) != 1 || hits[0].GetMemory().GetId() != id || hits[0].GetRelevanceScore() != 1 {
		t.Fatalf("BM25 fallback hits = %v", hits)
	}
	if !strings.Contains(logs.String(), "embedding the query failed, falling back to BM25 search") {
		t.Errorf("search log = %s", logs)
	}

	t.Run("once the embedder is back, the memory without a vector is found by its words", func(t *testing.T) {
		emb.failing.Store(false)
		hits := searchIDs(t, c, "u", "automobile parked")
		if len(hits) != 1 || hits[0].GetMemory().GetId() != id {
			t.Fatalf("hits = %v", hits)
		}
		if s := hits[0].GetRelevanceScore(); s != 1-memory.SemanticWeight {
			t.Errorf("score = %v, want the BM25 share %v", s, 1-memory.SemanticWeight)
		}
	})
}

// fakeGeneration serves Embed with hashEmbed vectors, or a scripted failure.
type fakeGeneration struct {
	generationv1.UnimplementedGenerationServiceServer
	mu      sync.Mutex
	targets []*typev1.Target
	answer  func(req *generationv1.EmbedRequest) (*generationv1.EmbedResponse, error)
}

func (f *fakeGeneration) Embed(_ context.Context, req *generationv1.EmbedRequest) (*generationv1.EmbedResponse, error) {
	f.mu.Lock()
	f.targets = append(f.targets, req.GetTarget())
	f.mu.Unlock()
	if f.answer != nil {
		return f.answer(req)
	}
	resp := &generationv1.EmbedResponse{Model: req.GetTarget().GetModel(), Usage: &typev1.TokenUsage{Input: int64(len(req.GetInputs())), Total: int64(len(req.GetInputs()))}}
	for _, text := range req.GetInputs() {
		resp.Embeddings = append(resp.Embeddings, &generationv1.Embedding{Values: hashEmbed(text)})
	}
	return resp, nil
}

func generationClient(t *testing.T, f *fakeGeneration) generationv1.GenerationServiceClient {
	t.Helper()
	return generationv1.NewGenerationServiceClient(grpctest.Serve(t, func(g grpc.ServiceRegistrar) {
		generationv1.RegisterGenerationServiceServer(g, f)
	}))
}

// The memory service embeds through the GenerationService with the configured target.
func TestGenerationEmbedder(t *testing.T) {
	gen := &fakeGeneration{}
	target := &typev1.Target{Provider: "local", Model: "nomic-embed-text"}
	c := newClient(t, memory.Options{Embedder: &memory.GenerationEmbedder{Client: generationClient(t, gen), Target: target}})
	id := store(t, c, "u", "", "the deploy key rotates monthly")
	store(t, c, "u", "", "lunch is at noon")
	resp, err := c.Search(t.Context(), &memoryv1.SearchRequest{UserId: "u", Query: "deploy key"})
	if err != nil {
		t.Fatal(err)
	}
	if hits := resp.GetHits(); len(hits) == 0 || hits[0].GetMemory().GetId() != id {
		t.Fatalf("hits = %v", hits)
	}
	// The search accounts its query's embedding, for the run it is made for.
	if acc := resp.GetAccounting(); len(acc) != 1 || acc[0].GetType() != typev1.AccountingType_ACCOUNTING_TYPE_EMBEDDING ||
		acc[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK || acc[0].GetProvider() != "local" ||
		acc[0].GetModel() != "nomic-embed-text" || acc[0].GetAttempts() != 1 || acc[0].GetCharactersIn() != int64(len("deploy key")) ||
		acc[0].GetTokens().GetInput() != 1 || acc[0].GetTimestampMs() == 0 {
		t.Errorf("accounting = %v, want one ok embedding of local/nomic-embed-text", acc)
	}
	gen.mu.Lock()
	defer gen.mu.Unlock()
	if len(gen.targets) != 3 {
		t.Errorf("%d Embed calls, want 3 (two stores, one search)", len(gen.targets))
	}
	for _, got := range gen.targets {
		if got.GetProvider() != "local" || got.GetModel() != "nomic-embed-text" {
			t.Errorf("target = %v", got)
		}
	}
}

func TestGenerationEmbedderErrors(t *testing.T) {
	table := []struct {
		name   string
		answer func(*generationv1.EmbedRequest) (*generationv1.EmbedResponse, error)
		want   string
		// status is the entry's: a request the provider answered is accounted ok even when
		// the answer is unusable.
		status typev1.AccountingStatus
	}{
		{"RPC failure", func(*generationv1.EmbedRequest) (*generationv1.EmbedResponse, error) {
			return nil, stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_AUTH, 0, "invalid api key")
		}, "embed with local/m: ", typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED},
		{"too few vectors", func(*generationv1.EmbedRequest) (*generationv1.EmbedResponse, error) {
			return &generationv1.EmbedResponse{}, nil
		}, "0 vectors for 2 texts", typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
		{"an empty vector", func(*generationv1.EmbedRequest) (*generationv1.EmbedResponse, error) {
			return &generationv1.EmbedResponse{Embeddings: []*generationv1.Embedding{{Values: []float32{1}}, {}}}, nil
		}, "vector 1 is empty", typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			e := &memory.GenerationEmbedder{Client: generationClient(t, &fakeGeneration{answer: tc.answer}), Target: &typev1.Target{Provider: "local", Model: "m"}}
			_, entry, err := e.Embed(t.Context(), []string{"a", "b"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
			if entry.GetType() != typev1.AccountingType_ACCOUNTING_TYPE_EMBEDDING || entry.GetStatus() != tc.status ||
				entry.GetAttempts() != 1 || (tc.status == typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED) != (entry.GetError() != "") {
				t.Errorf("entry = %v, want an embedding accounted %s", entry, tc.status)
			}
		})
	}
	t.Run("vectors come back in input order", func(t *testing.T) {
		e := &memory.GenerationEmbedder{Client: generationClient(t, &fakeGeneration{}), Target: &typev1.Target{Provider: "local", Model: "m"}}
		got, _, err := e.Embed(t.Context(), []string{"alpha", "beta gamma"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0][0] != hashEmbed("alpha")[0] || len(got[1]) != embedDims {
			t.Errorf("vectors = %v", got)
		}
	})
}

// A vector holding NaN or an infinity (a provider's, or a team's generation stage's, over
// protobuf, which carries any float) is an embedding failure: the memory is stored without
// it, and found by its words. Its relevance was NaN, for every query: the memory was never
// found again, not even by its words; a query's made every search find nothing.
func TestGenerationEmbedderNotFinite(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
		t.Run(fmt.Sprint(bad), func(t *testing.T) {
			breaking := func(req *generationv1.EmbedRequest) (*generationv1.EmbedResponse, error) {
				resp := &generationv1.EmbedResponse{}
				for _, text := range req.GetInputs() {
					v := hashEmbed(text)
					if strings.Contains(text, "broken") {
						v[0] = bad
					}
					resp.Embeddings = append(resp.Embeddings, &generationv1.Embedding{Values: v})
				}
				return resp, nil
			}
			gen := &fakeGeneration{answer: breaking}
			target := &typev1.Target{Provider: "local", Model: "m"}
			c := serve(t, memory.Options{Embedder: &memory.GenerationEmbedder{
				Client: generationClient(t, gen), Target: target}})
			id := store(t, c, "u", "", "the broken deploy key rotates monthly")
			other := store(t, c, "u", "", "the deploy script runs nightly")
			// Without a vector, the memory takes part by its words only (their share, 0.2).
			hits := searchIDs(t, c, "u", "deploy key")
			if len(hits) != 2 || hits[1].GetMemory().GetId() != id ||
				hits[1].GetRelevanceScore() != 1-memory.SemanticWeight {
				t.Errorf("hits = %v, want the memory with the broken vector too, by its words",
					hits)
			}
			if hits := searchIDs(t, c, "u", "broken script"); len(hits) != 2 {
				t.Errorf("hits of a query with a broken vector = %v, want both (%s, %s) by BM25",
					hits, id, other)
			}
			// A fact learned from a run is stored without such a vector too.
			saveRun(t, c, "learner", conversation("run-1", "My broken bike is green."))
			learnt := learned(t, c, "run-1").GetMemoryIds()
			if hits := searchIDs(t, c, "learner", "bike"); len(learnt) != 1 || len(hits) != 1 ||
				hits[0].GetMemory().GetId() != learnt[0] {
				t.Errorf("hits = %v, want the fact learned (%v), by its words", hits, learnt)
			}
		})
	}
}

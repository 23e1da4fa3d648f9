package action_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/generation"
	memorysvc "github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// memoryServer is a minimal MemoryService serving Search over per-user memories: a memory
// matches when it shares query words, scored by the fraction of query words it contains.
type memoryServer struct {
	memoryv1.UnimplementedMemoryServiceServer

	memories []*memoryv1.Memory

	mu       sync.Mutex
	requests []*memoryv1.SearchRequest
	failures []error // returned, in order, before searching
}

func (m *memoryServer) Search(_ context.Context, req *memoryv1.SearchRequest) (*memoryv1.SearchResponse, error) {
	m.mu.Lock()
	m.requests = append(m.requests, proto.CloneOf(req))
	if len(m.failures) > 0 {
		err := m.failures[0]
		m.failures = m.failures[1:]
		m.mu.Unlock()
		return nil, err
	}
	m.mu.Unlock()

	words := strings.Fields(strings.ToLower(req.GetQuery()))
	var hits []*memoryv1.MemoryHit
	for _, mem := range m.memories {
		if mem.GetUserId() != req.GetUserId() || mem.GetCollection() != req.GetCollection() {
			continue
		}
		matched := 0
		for _, w := range words {
			if strings.Contains(strings.ToLower(mem.GetContent()), w) {
				matched++
			}
		}
		if matched > 0 {
			hits = append(hits, &memoryv1.MemoryHit{Memory: mem, RelevanceScore: float64(matched) / float64(len(words))})
		}
	}
	slices.SortStableFunc(hits, func(a, b *memoryv1.MemoryHit) int {
		switch {
		case a.GetRelevanceScore() > b.GetRelevanceScore():
			return -1
		case a.GetRelevanceScore() < b.GetRelevanceScore():
			return 1
		}
		return 0
	})
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = 5
	}
	return &memoryv1.SearchResponse{Hits: hits[:min(limit, len(hits))]}, nil
}

func (m *memoryServer) lastRequest() *memoryv1.SearchRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[len(m.requests)-1]
}

func memory(id, user, collection, content, title string) *memoryv1.Memory {
	m := &memoryv1.Memory{Id: id, UserId: user, Collection: collection, Content: content}
	if title != "" {
		m.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{"title": structpb.NewStringValue(title)}}
	}
	return m
}

// serveWithMemory starts mem and the action service using it.
func serveWithMemory(t *testing.T, mem *memoryServer) actionv1.ActionServiceClient {
	t.Helper()
	return serve(t, action.Options{Memory: memoryv1.NewMemoryServiceClient(serveMemory(t, mem)), RetryBase: time.Millisecond})
}

// serveMemory serves mem over gRPC.
func serveMemory(t *testing.T, mem *memoryServer) *grpc.ClientConn {
	t.Helper()
	return grpctest.Serve(t, func(g grpc.ServiceRegistrar) { memoryv1.RegisterMemoryServiceServer(g, mem) })
}

func TestKnowledgeSearch(t *testing.T) {
	mem := &memoryServer{memories: []*memoryv1.Memory{
		memory("m1", "alice", "knowledge", "Retries use exponential backoff with jitter.", "Retry policy"),
		memory("m2", "alice", "knowledge", "Timeouts default to 30 seconds; backoff doubles.", ""),
		memory("m3", "alice", "", "Alice's personal note about backoff jitter.", "Personal"),
		memory("m4", "bob", "knowledge", "Bob's exponential backoff with jitter guide.", "Bob's guide"),
	}}
	client := serveWithMemory(t, mem)

	table := []struct {
		name      string
		user      string
		args      map[string]any
		want      string
		wantLimit int32
	}{
		{
			name: "numbered references, title or id",
			user: "alice", args: map[string]any{"query": "backoff jitter"},
			want: "[1] Retry policy (score 1.00)\nRetries use exponential backoff with jitter.\n\n" +
				"[2] m2 (score 0.50)\nTimeouts default to 30 seconds; backoff doubles.",
			wantLimit: 5,
		},
		{
			name: "limit passed through",
			user: "alice", args: map[string]any{"query": "backoff jitter", "limit": 1},
			want:      "[1] Retry policy (score 1.00)\nRetries use exponential backoff with jitter.",
			wantLimit: 1,
		},
		{
			name: "another user sees only their own",
			user: "bob", args: map[string]any{"query": "jitter"},
			want:      "[1] Bob's guide (score 1.00)\nBob's exponential backoff with jitter guide.",
			wantLimit: 5,
		},
		{
			name: "no hits is the empty sentinel",
			user: "alice", args: map[string]any{"query": "kubernetes"},
			want:      "DOCUMENTATION_SEARCH_RESULT: EMPTY",
			wantLimit: 5,
		},
		{
			name: "a user without knowledge gets the empty sentinel",
			user: "carol", args: map[string]any{"query": "backoff"},
			want:      "DOCUMENTATION_SEARCH_RESULT: EMPTY",
			wantLimit: 5,
		},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			req := request(t, "knowledge_search", tc.args)
			req.UserId = tc.user
			resp, err := client.Execute(t.Context(), req)
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != tc.want {
				t.Fatalf("got status %v error %q result:\n%s\nwant:\n%s", resp.GetStatus(), resp.GetError(), resp.GetResult(), tc.want)
			}
			got := mem.lastRequest()
			want := &memoryv1.SearchRequest{UserId: tc.user, Query: tc.args["query"].(string), Limit: tc.wantLimit, Collection: "knowledge", MinScore: 0.3}
			if !proto.Equal(got, want) {
				t.Errorf("memory got %v, want %v", got, want)
			}
		})
	}
	if action.EmptySearchResult != "DOCUMENTATION_SEARCH_RESULT: EMPTY" {
		t.Errorf("EmptySearchResult = %q", action.EmptySearchResult)
	}
}

// TestKnowledgeSearchNamesFiles: a reference names the file it comes from (its "source", as
// agentmesh ingest stores it) after its title, so the model can cite the file (RAG contract
// §4); a file titled by its own name is named once, and a label is one line.
func TestKnowledgeSearchNamesFiles(t *testing.T) {
	withSource := func(id, content, title, source string) *memoryv1.Memory {
		m := memory(id, "dave", "knowledge", content, "")
		m.Metadata = &structpb.Struct{Fields: map[string]*structpb.Value{
			"title": structpb.NewStringValue(title), "source": structpb.NewStringValue(source),
		}}
		return m
	}
	mem := &memoryServer{memories: []*memoryv1.Memory{
		withSource("m1", "jitter one", "Retry policy", "ops/retry.md"),
		withSource("m2", "jitter two", "notes.txt", "sub/notes.txt"),
		withSource("m3", "jitter three", "Two\nlines", ""),
	}}
	client := serveWithMemory(t, mem)
	req := request(t, "knowledge_search", map[string]any{"query": "jitter"})
	req.UserId = "dave"
	resp, err := client.Execute(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := "[1] Retry policy — ops/retry.md (score 1.00)\njitter one\n\n" +
		"[2] sub/notes.txt (score 1.00)\njitter two\n\n" +
		"[3] Two lines (score 1.00)\njitter three"
	if got := resp.GetResult(); got != want {
		t.Errorf("result:\n%s\nwant:\n%s", got, want)
	}
}

func TestKnowledgeSearchFailures(t *testing.T) {
	t.Run("needs a user", func(t *testing.T) {
		mem := &memoryServer{}
		client := serveWithMemory(t, mem)
		req := request(t, "knowledge_search", map[string]any{"query": "x"})
		req.UserId = ""
		resp, err := client.Execute(t.Context(), req)
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || !strings.Contains(resp.GetError(), "user_id") {
			t.Fatalf("status %v error %q, want an error about the user_id", resp.GetStatus(), resp.GetError())
		}
	})
	t.Run("unavailable memory is retried", func(t *testing.T) {
		mem := &memoryServer{
			memories: []*memoryv1.Memory{memory("m1", "user-1", "knowledge", "backoff", "")},
			failures: []error{status.Error(codes.Unavailable, "connection refused"), status.Error(codes.Unavailable, "connection refused")},
		}
		client := serveWithMemory(t, mem)
		resp, err := client.Execute(t.Context(), request(t, "knowledge_search", map[string]any{"query": "backoff"}))
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetAttempts() != 3 || resp.GetResult() != "[1] m1 (score 1.00)\nbackoff" {
			t.Fatalf("status %v attempts %d result %q error %q, want success after 3 attempts", resp.GetStatus(), resp.GetAttempts(), resp.GetResult(), resp.GetError())
		}
	})
	t.Run("a rejected search is not retried", func(t *testing.T) {
		mem := &memoryServer{failures: []error{status.Error(codes.PermissionDenied, "not your memory")}}
		client := serveWithMemory(t, mem)
		resp, err := client.Execute(t.Context(), request(t, "knowledge_search", map[string]any{"query": "backoff"}))
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || resp.GetAttempts() != 1 ||
			resp.GetError() != "knowledge search: not your memory" {
			t.Fatalf("status %v attempts %d error %q", resp.GetStatus(), resp.GetAttempts(), resp.GetError())
		}
	})
	t.Run("arguments", func(t *testing.T) {
		client := serveWithMemory(t, &memoryServer{})
		table := []struct {
			name string
			args map[string]any
			want []string
		}{
			{"missing query", map[string]any{}, []string{"missing property 'query'"}},
			{"blank query", map[string]any{"query": "   "}, []string{`"query"`, "does not match pattern"}},
			{"limit too high", map[string]any{"query": "x", "limit": 50}, []string{`"limit"`, "maximum: got 50, want 20"}},
			{"limit too low", map[string]any{"query": "x", "limit": 0}, []string{`"limit"`, "minimum: got 0, want 1"}},
			{"fractional limit", map[string]any{"query": "x", "limit": 2.5}, []string{`"limit"`, "want integer"}},
		}
		for _, tc := range table {
			t.Run(tc.name, func(t *testing.T) {
				_, err := client.Execute(t.Context(), request(t, "knowledge_search", tc.args))
				grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS, tc.want...)
			})
		}
	})
}

// With embeddings every chunk gets a score from its cosine similarity to any query, so
// knowledge_search's min_score is what keeps the empty-result sentinel for unrelated queries.
// The chain is the production one: ingested Markdown in a real memory service that embeds
// through a real generation service with the rules provider.
func TestKnowledgeSearchWithEmbeddings(t *testing.T) {
	gen := generation.New(generation.Options{Providers: map[string]generation.Provider{"rules": generation.NewRules()}})
	embedder := &memorysvc.GenerationEmbedder{
		Client: generationv1.NewGenerationServiceClient(grpctest.Serve(t, gen.Register)),
		Target: &typev1.Target{Provider: "rules", Model: "rules-v1"},
	}
	mem := memorysvc.New(memorysvc.Options{Embedder: embedder})
	memClient := memoryv1.NewMemoryServiceClient(grpctest.Serve(t, mem.Register))
	client := serve(t, action.Options{Memory: memClient})

	dir := t.TempDir()
	for name, text := range map[string]string{
		"retries.md": "# Retry policy\n\nFailed calls are retried with exponential backoff and jitter, at most three times.\n",
		"deploy.md":  "# Deployment\n\nThe mesh ships as nine containers; each stage listens on its own gRPC port.\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := memorysvc.IngestDir(t.Context(), memClient, "user-1", action.KnowledgeCollection, dir); err != nil {
		t.Fatalf("IngestDir: %v", err)
	}

	search := func(t *testing.T, query string) string {
		t.Helper()
		resp, err := client.Execute(t.Context(), request(t, "knowledge_search", map[string]any{"query": query}))
		if err != nil || resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS {
			t.Fatalf("knowledge_search %q: status %v error %q (%v)", query, resp.GetStatus(), resp.GetError(), err)
		}
		return resp.GetResult()
	}
	for _, query := range []string{"weather forecast", "printer"} {
		t.Run("unrelated "+query, func(t *testing.T) {
			// Without a floor the embeddings find something for any query: the case proves the floor.
			resp, err := memClient.Search(t.Context(), &memoryv1.SearchRequest{UserId: "user-1", Query: query, Collection: action.KnowledgeCollection})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetHits()) == 0 {
				t.Fatalf("a search without min_score finds nothing for %q: the case proves nothing", query)
			}
			if top := resp.GetHits()[0].GetRelevanceScore(); top >= action.KnowledgeMinScore {
				t.Fatalf("the best hit for %q scores %.3f, not below the floor %.1f", query, top, action.KnowledgeMinScore)
			}
			if got := search(t, query); got != action.EmptySearchResult {
				t.Errorf("knowledge_search %q = %q, want %q", query, got, action.EmptySearchResult)
			}
		})
	}
	t.Run("related", func(t *testing.T) {
		got := search(t, "backoff jitter")
		if !strings.HasPrefix(got, "[1] Retry policy — retries.md (score ") || !strings.Contains(got, "exponential backoff and jitter") || strings.Contains(got, "Deployment") {
			t.Errorf("knowledge_search = %q, want only the retry policy as reference [1]", got)
		}
	})
	if action.KnowledgeMinScore != 0.3 {
		t.Errorf("KnowledgeMinScore = %v, want 0.3", action.KnowledgeMinScore)
	}
}

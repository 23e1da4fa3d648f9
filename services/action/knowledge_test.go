package action_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
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
	return grpctest.Serve(t, func(g *grpc.Server) { memoryv1.RegisterMemoryServiceServer(g, mem) })
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
			want := &memoryv1.SearchRequest{UserId: tc.user, Query: tc.args["query"].(string), Limit: tc.wantLimit, Collection: "knowledge"}
			if !proto.Equal(got, want) {
				t.Errorf("memory got %v, want %v", got, want)
			}
		})
	}
	if action.EmptySearchResult != "DOCUMENTATION_SEARCH_RESULT: EMPTY" {
		t.Errorf("EmptySearchResult = %q", action.EmptySearchResult)
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
				wantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS, tc.want...)
			})
		}
	})
}

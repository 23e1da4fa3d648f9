package assembly_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/assembly"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

// memoryClient serves a real memory service and returns a client of it.
func memoryClient(t *testing.T, opts memory.Options) memoryv1.MemoryServiceClient {
	t.Helper()
	return memoryv1.NewMemoryServiceClient(grpctest.Serve(t, memory.New(opts).Register))
}

func remember(t *testing.T, mem memoryv1.MemoryServiceClient, userID, content, title string) string {
	t.Helper()
	req := &memoryv1.StoreRequest{UserId: userID, Content: &typev1.Message{Role: typev1.Role_ROLE_USER, Content: content}}
	if title != "" {
		md, err := structpb.NewStruct(map[string]any{"title": title})
		if err != nil {
			t.Fatal(err)
		}
		req.Metadata = md
	}
	resp, err := mem.Store(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetMemoryId()
}

func TestMemoryHits(t *testing.T) {
	mem := memoryClient(t, memory.Options{})
	helix := remember(t, mem, "alice", "My editor is Helix with the gruvbox theme", "editor preference")
	theme := remember(t, mem, "alice", "The office theme song is loud", "")
	remember(t, mem, "alice", "Deploys happen on Tuesdays", "")
	remember(t, mem, "bob", "My editor is Emacs with the gruvbox theme", "")
	c := newClient(t, assembly.Options{Memory: mem})

	history := []*typev1.Message{sys("S", 6), usr("U1", 16), usr("U2", 16)}
	step := &typev1.Step{Id: "s1", Description: "Configure the editor"}
	first := "[1] My editor is Helix with the gruvbox theme"
	second := "[2] The office theme song is loud"

	t.Run("hits become one message with a source each", func(t *testing.T) {
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
			History: history, MaxTokens: 1000, UserId: "alice", MemoryQuery: "editor theme", CurrentStep: step,
		})
		if err != nil {
			t.Fatal(err)
		}
		msgs := resp.GetMessages()
		wantMem := "Relevant memories:\n" + first + "\n" + second
		if len(msgs) != 5 || msgs[1].GetContent() != "Current step s1: Configure the editor" || msgs[2].GetContent() != wantMem {
			t.Fatalf("messages = %q", labels(msgs))
		}
		if msgs[2].GetRole() != typev1.Role_ROLE_SYSTEM {
			t.Errorf("memory message role = %v", msgs[2].GetRole())
		}
		src := resp.GetSources()
		if len(src) != 3 || src[0].GetKind() != "plan" {
			t.Fatalf("sources = %v", src)
		}
		if s := src[1]; s.GetKind() != "memory" || s.GetId() != helix || s.GetTitle() != "editor preference" || s.GetScore() != 1 {
			t.Errorf("first memory source = %v", s)
		}
		if s := src[2]; s.GetKind() != "memory" || s.GetId() != theme || s.GetScore() <= 0 || s.GetScore() >= 1 {
			t.Errorf("second memory source = %v", s)
		}
		if resp.GetMemoryUnavailable() {
			t.Error("memory_unavailable = true")
		}
		checkInvariants(t, resp, 1000)
	})
	t.Run("the hits found are returned, and shown again without a search", func(t *testing.T) {
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
			History: history, MaxTokens: 1000, UserId: "alice", MemoryQuery: "editor theme"})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(resp.GetRecalled()); n != 2 {
			t.Fatalf("%d hits recalled, want 2", n)
		}
		// A later turn: no query, the recalled hits, and a stage without memory.
		later, err := newClient(t, assembly.Options{}).Assemble(t.Context(), &contextv1.AssembleRequest{
			History: history, MaxTokens: 1000, UserId: "alice", Recalled: resp.GetRecalled()})
		if err != nil {
			t.Fatal(err)
		}
		if got := later.GetMessages()[1].GetContent(); got != "Relevant memories:\n"+first+"\n"+second {
			t.Errorf("memory message of a later turn = %q", got)
		}
		if len(later.GetRecalled()) != 0 || len(later.GetAccounting()) != 0 {
			t.Errorf("a later turn recalled %v, accounted %v: it searched", later.GetRecalled(), later.GetAccounting())
		}
	})
	t.Run("memory_limit caps the hits", func(t *testing.T) {
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
			History: history, MaxTokens: 1000, UserId: "alice", MemoryQuery: "editor theme", MemoryLimit: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetMessages()[1].GetContent(); got != "Relevant memories:\n"+first {
			t.Errorf("memory message = %q", got)
		}
	})
	t.Run("the lowest-scored hit is dropped first to fit", func(t *testing.T) {
		one := tokens.Message(&typev1.Message{Content: "Relevant memories:\n" + first})
		budget := 30 + one // S + U2 + the best hit only
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
			History: history, MaxTokens: budget, UserId: "alice", MemoryQuery: "editor theme",
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S", "Relevant memories:\n" + first, "U2"}) {
			t.Errorf("messages = %q", got)
		}
		if len(resp.GetSources()) != 1 || resp.GetSources()[0].GetId() != helix {
			t.Errorf("sources = %v", resp.GetSources())
		}
		// Without room for the best hit, the shorter one after it still fits.
		resp, err = c.Assemble(t.Context(), &contextv1.AssembleRequest{
			History: history, MaxTokens: budget - 1, UserId: "alice", MemoryQuery: "editor theme",
		})
		if err != nil {
			t.Fatal(err)
		}
		onlySecond := "Relevant memories:\n[1] The office theme song is loud"
		if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S", onlySecond, "U2"}) ||
			len(resp.GetSources()) != 1 || resp.GetSources()[0].GetId() != theme {
			t.Errorf("the best hit does not fit: messages = %q, sources %v", got, resp.GetSources())
		}
		resp, err = c.Assemble(t.Context(), &contextv1.AssembleRequest{
			History: history, MaxTokens: 30 + 8, UserId: "alice", MemoryQuery: "editor theme",
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S", "U2"}) || len(resp.GetSources()) != 0 {
			t.Errorf("no hit fits: messages = %q, sources %v", got, resp.GetSources())
		}
	})
	t.Run("only the user's own memories", func(t *testing.T) {
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
			History: history, MaxTokens: 1000, UserId: "bob", MemoryQuery: "editor",
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetMessages()[1].GetContent(); got != "Relevant memories:\n[1] My editor is Emacs with the gruvbox theme" {
			t.Errorf("bob's memory message = %q", got)
		}
	})
	t.Run("no query, no memory", func(t *testing.T) {
		resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{History: history, MaxTokens: 1000, UserId: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetMessages()) != 3 || len(resp.GetSources()) != 0 {
			t.Errorf("messages = %q", labels(resp.GetMessages()))
		}
	})
}

// searchFailingStore is a memory store whose searches fail like a broken database.
type searchFailingStore struct{ memory.Store }

func (searchFailingStore) SearchMemories(context.Context, memory.SearchQuery) ([]*memoryv1.MemoryHit, error) {
	return nil, errors.New("database is locked")
}

// hangingMemory is a memory server whose searches never answer before the caller gives up.
type hangingMemory struct {
	memoryv1.UnimplementedMemoryServiceServer
}

func (hangingMemory) Search(ctx context.Context, _ *memoryv1.SearchRequest) (*memoryv1.SearchResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestMemoryUnavailable(t *testing.T) {
	closed := memoryv1.NewMemoryServiceClient(func() *grpc.ClientConn {
		conn := grpctest.Serve(t, memory.New(memory.Options{}).Register)
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
		return conn
	}())
	hanging := memoryv1.NewMemoryServiceClient(grpctest.Serve(t, func(g grpc.ServiceRegistrar) {
		memoryv1.RegisterMemoryServiceServer(g, hangingMemory{})
	}))
	table := []struct {
		name string
		opts assembly.Options
	}{
		{"storage error", assembly.Options{Memory: memoryClient(t, memory.Options{Store: searchFailingStore{memory.NewMemoryStore()}})}},
		{"connection closed", assembly.Options{Memory: closed}},
		{"timeout", assembly.Options{Memory: hanging, MemoryTimeout: 20 * time.Millisecond}},
	}
	history := []*typev1.Message{sys("S", 6), usr("U1", 16), usr("U2", 16)}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tc.opts)
			resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
				History: history, MaxTokens: 1000, UserId: "alice", MemoryQuery: "anything",
				CurrentStep: &typev1.Step{Id: "s1", Description: "Answer"},
			})
			if err != nil {
				t.Fatalf("assembly must go on without memory: %v", err)
			}
			if !resp.GetMemoryUnavailable() {
				t.Error("memory_unavailable = false")
			}
			if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S", "Current step s1: Answer", "U1", "U2"}) {
				t.Errorf("messages = %q", got)
			}
			if len(resp.GetSources()) != 1 || resp.GetSources()[0].GetKind() != "plan" {
				t.Errorf("sources = %v", resp.GetSources())
			}
		})
	}
}

// Without a memory client the memory query is ignored and memory is not reported down.
func TestMemoryNotConfigured(t *testing.T) {
	c := newClient(t, assembly.Options{})
	resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
		History: []*typev1.Message{usr("U", 4)}, MaxTokens: 100, UserId: "alice", MemoryQuery: "editor",
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetMemoryUnavailable() || len(resp.GetMessages()) != 1 {
		t.Errorf("memory_unavailable %v, messages %q", resp.GetMemoryUnavailable(), labels(resp.GetMessages()))
	}
}

// TestALongMemoryQueryIsCut: a memory_query over the memory stage's bound on a search's query
// (64 KiB; an intent model's goal may be longer in bytes) is searched with its start, cut at a
// character, instead of being refused by the memory stage, which left the run without memory
// (memory_unavailable).
func TestALongMemoryQueryIsCut(t *testing.T) {
	mem := memoryClient(t, memory.Options{})
	helix := remember(t, mem, "alice", "My editor is Helix with the gruvbox theme", "")
	c := newClient(t, assembly.Options{Memory: mem})
	query := "editor theme " + strings.Repeat("é", memory.MaxQueryBytes/2) // over the bound in bytes
	resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
		History: []*typev1.Message{usr("U1", 16)}, MaxTokens: 100000, UserId: "alice", MemoryQuery: query,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetMemoryUnavailable() || len(resp.GetRecalled()) != 1 || resp.GetRecalled()[0].GetMemory().GetId() != helix {
		t.Errorf("memory_unavailable %v, recalled %v; want the memory found", resp.GetMemoryUnavailable(), resp.GetRecalled())
	}
}

// TestABlankMemoryQuery: a memory_query of white space alone (an intent model's blank goal)
// searches nothing, and memory is not reported down. It was sent to the memory stage, which
// refuses a blank query (INVALID_ARGUMENT), and the refusal was reported as memory_unavailable:
// the run said MEMORY_UNAVAILABLE while the memory stage was up.
func TestABlankMemoryQuery(t *testing.T) {
	c := newClient(t, assembly.Options{Memory: memoryClient(t, memory.Options{})})
	resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
		History: []*typev1.Message{usr("U", 4)}, MaxTokens: 100, UserId: "alice", MemoryQuery: " \n\t",
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetMemoryUnavailable() || len(resp.GetMessages()) != 1 {
		t.Errorf("memory_unavailable %v, messages %q; want no search and memory not reported down",
			resp.GetMemoryUnavailable(), labels(resp.GetMessages()))
	}
}

// TestALongMemoryLeavesRoomForOthers: a best hit too long for the budget is left out alone,
// not with every hit after it (they were dropped from the lowest score up, the long one last).
func TestALongMemoryLeavesRoomForOthers(t *testing.T) {
	c := newClient(t, assembly.Options{})
	hit := func(id, content string, score float64) *memoryv1.MemoryHit {
		m := &memoryv1.Memory{Id: id, Content: content}
		return &memoryv1.MemoryHit{Memory: m, RelevanceScore: score}
	}
	recalled := []*memoryv1.MemoryHit{
		hit("short", "Deploys happen on Tuesdays", 0.5),
		hit("long", strings.Repeat("a long pasted document ", 400), 0.9),
		hit("other", "The editor is Helix", 0.7),
	}
	history := []*typev1.Message{sys("S", 6), usr("U", 16)}
	want := "Relevant memories:\n[1] The editor is Helix\n[2] Deploys happen on Tuesdays"
	budget := 30 + tokens.Message(&typev1.Message{Content: want})
	resp, err := c.Assemble(t.Context(), &contextv1.AssembleRequest{
		History: history, MaxTokens: budget, Recalled: recalled})
	if err != nil {
		t.Fatal(err)
	}
	if got := labels(resp.GetMessages()); !slices.Equal(got, []string{"S", want, "U"}) {
		t.Errorf("messages = %q", got)
	}
	var ids []string
	for _, s := range resp.GetSources() {
		ids = append(ids, s.GetId())
	}
	if !slices.Equal(ids, []string{"other", "short"}) {
		t.Errorf("sources = %v, want [other short]", ids)
	}
	checkInvariants(t, resp, budget)
}

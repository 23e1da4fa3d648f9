package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/protobuf/types/known/structpb"
)

// chunkMemory returns a memory of alice holding chunk index of the document source.
func chunkMemory(t *testing.T, id, source string, index int, content string) *memoryv1.Memory {
	t.Helper()
	m := newMemory(t, "alice", "knowledge", id, at(len(id)), content)
	meta, err := structpb.NewStruct(map[string]any{
		memory.MetaSource: source, memory.MetaFolder: "docs", memory.MetaChunk: index})
	if err != nil {
		t.Fatal(err)
	}
	m.ConversationId, m.Metadata = "", meta
	return m
}

// A chunk of a document (a memory whose metadata names its source) stored again replaces the
// one stored before, in place of it under the quota; the same text from another source, or
// another chunk, is another memory, and memories of no document are never replaced.
func testDocumentChunks(t *testing.T, s memory.Store) {
	ctx := t.Context()
	const quota = 3
	for _, m := range []*memoryv1.Memory{
		chunkMemory(t, "c1", "a.md", 0, "kubernetes upgrade notes"),
		chunkMemory(t, "c2", "a.md", 0, "kubernetes upgrade notes"),
		chunkMemory(t, "c3", "b.md", 0, "kubernetes upgrade notes"),
		chunkMemory(t, "c4", "a.md", 0, "kubernetes upgrade notes"),
		chunkMemory(t, "c5", "a.md", 1, "kubernetes upgrade notes"),
	} {
		if err := s.PutMemory(ctx, m, nil, quota); err != nil {
			t.Fatalf("put %s: %v", m.GetId(), err)
		}
	}
	got := memoryIDs(list(t, s, "alice", "knowledge"))
	if !slices.Equal(got, []string{"c5", "c4", "c3"}) {
		t.Errorf("list = %v, want c5, c4 and c3 (c4 replaced c2, which replaced c1)", got)
	}
	hits, err := s.SearchMemories(ctx, memory.SearchQuery{UserID: "alice", Collection: "knowledge",
		Query: "kubernetes", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 3 {
		t.Errorf("search found %d memories, want the 3 stored", len(hits))
	}
	extra := chunkMemory(t, "c6", "c.md", 0, "one too many")
	if err := s.PutMemory(ctx, extra, nil, quota); !errors.Is(err, memory.ErrQuotaExceeded) {
		t.Errorf("put a fourth chunk under a quota of 3 = %v, want ErrQuotaExceeded", err)
	}
	for _, id := range []string{"n1", "n2"} {
		m := newMemory(t, "bob", "", id, at(1), "the same note")
		m.Metadata = nil
		put(t, s, m, nil)
	}
	if got := list(t, s, "bob", ""); len(got) != 2 {
		t.Errorf("bob has %d memories of the same text, no document's, want 2", len(got))
	}
}

// Stores of the same chunk at the same time leave one memory, and count one in the quota.
func testDocumentChunksConcurrent(t *testing.T, s memory.Store) {
	const writers = 8
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			m := chunkMemory(t, fmt.Sprintf("c%d", i), "a.md", 0, "the same chunk")
			if err := s.PutMemory(t.Context(), m, nil, 2); err != nil {
				t.Errorf("put %s: %v", m.GetId(), err)
			}
		})
	}
	wg.Wait()
	if got := list(t, s, "alice", "knowledge"); len(got) != 1 {
		t.Fatalf("%d memories hold the chunk, want 1", len(got))
	}
	put := func(id string) error {
		return s.PutMemory(t.Context(), chunkMemory(t, id, "b.md", 0, "another"), nil, 2)
	}
	if err := put("d1"); err != nil {
		t.Errorf("put a second chunk under a quota of 2: %v", err)
	}
	if err := put("d2"); err != nil {
		t.Errorf("put the second chunk again: %v", err)
	}
	err := s.PutMemory(t.Context(), chunkMemory(t, "d3", "c.md", 0, "third"), nil, 2)
	if !errors.Is(err, memory.ErrQuotaExceeded) {
		t.Errorf("put a third chunk under a quota of 2 = %v, want ErrQuotaExceeded", err)
	}
}

package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// folderChunk returns chunkMemory's chunk of the document source of the folder folder.
func folderChunk(t *testing.T, id, folder, source string, index int,
	content string) *memoryv1.Memory {
	t.Helper()
	m := chunkMemory(t, id, source, index, content)
	m.Metadata.Fields[memory.MetaFolder] = structpb.NewStringValue(folder)
	return m
}

// document returns the document of alice's chunks, named as the first one's.
func document(t *testing.T, chunks ...*memoryv1.Memory) memory.Document {
	t.Helper()
	return memory.Document{UserID: "alice", Name: memory.DocumentName(chunks[0]), Chunks: chunks}
}

// PutDocument replaces every chunk of a document (its source and folder, whatever their text)
// with its new ones, as a unit, and names those it replaced; the same path in another folder,
// another document and other memories stay. The chunks it replaces make room under the quota:
// a document that grows past it changes nothing. A document of no chunks deletes its chunks.
func testPutDocument(t *testing.T, s memory.Store) {
	ctx := t.Context()
	const quota = 5
	for _, m := range []*memoryv1.Memory{
		folderChunk(t, "a0", "docs", "a.md", 0, "old zero"),
		folderChunk(t, "a1", "docs", "a.md", 1, "old one"),
		folderChunk(t, "b0", "docs", "b.md", 0, "another document"),
		folderChunk(t, "x0", "other", "a.md", 0, "another folder's file"),
	} {
		if err := s.PutMemory(ctx, m, nil, quota); err != nil {
			t.Fatalf("put %s: %v", m.GetId(), err)
		}
	}
	grown := document(t, folderChunk(t, "n0", "docs", "a.md", 0, "new zero"),
		folderChunk(t, "n1", "docs", "a.md", 1, "new one"),
		folderChunk(t, "n2", "docs", "a.md", 2, "new two"),
		folderChunk(t, "n3", "docs", "a.md", 3, "new three"))
	if _, err := s.PutDocument(ctx, grown, quota); !errors.Is(err, memory.ErrQuotaExceeded) {
		t.Errorf("put a document of 4 chunks in place of 2, 4 memories held under a quota of 5 "+
			"= %v, want ErrQuotaExceeded", err)
	}
	got := memoryIDs(list(t, s, "alice", "knowledge"))
	if !slices.Equal(got, []string{"x0", "b0", "a1", "a0"}) {
		t.Fatalf("after a put over the quota the collection holds %v, want it unchanged", got)
	}
	doc := document(t, folderChunk(t, "n0", "docs", "a.md", 0, "new zero"),
		folderChunk(t, "n1", "docs", "a.md", 1, "new one"),
		folderChunk(t, "n2", "docs", "a.md", 2, "new two"))
	replaced, err := s.PutDocument(ctx, doc, quota)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(replaced, []string{"a0", "a1"}) {
		t.Errorf("replaced %v, want a0 and a1", replaced)
	}
	got = memoryIDs(list(t, s, "alice", "knowledge"))
	if !slices.Equal(got, []string{"x0", "n2", "n1", "n0", "b0"}) {
		t.Errorf("the collection holds %v, want n0 to n2 in place of a0 and a1, b0 and x0", got)
	}
	hits, err := s.SearchMemories(ctx, memory.SearchQuery{UserID: "alice", Collection: "knowledge",
		Query: "new old", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	old := func(id string) bool { return id[0] != 'n' }
	if got := hitIDs(hits); len(got) != 3 || slices.ContainsFunc(got, old) {
		t.Errorf("search found %v, want the 3 new chunks only", got)
	}
	err = s.PutMemory(ctx, folderChunk(t, "full", "docs", "c.md", 0, "full"), nil, quota)
	if !errors.Is(err, memory.ErrQuotaExceeded) {
		t.Errorf("put a sixth memory under a quota of 5 = %v, want ErrQuotaExceeded", err)
	}
	emptied := memory.Document{UserID: "alice", Name: doc.Name}
	if replaced, err := s.PutDocument(ctx, emptied, quota); err != nil || len(replaced) != 3 {
		t.Fatalf("put the document without chunks: replaced %v, %v; want its 3 chunks",
			replaced, err)
	}
	got = memoryIDs(list(t, s, "alice", "knowledge"))
	if !slices.Equal(got, []string{"x0", "b0"}) {
		t.Errorf("after the document is emptied the collection holds %v, want x0 and b0", got)
	}
	// The chunks deleted are off the quota: three more memories fit, and no fourth.
	for _, id := range []string{"m1", "m2", "m3", "m4"} {
		err := s.PutMemory(ctx, newMemory(t, "alice", "", id, at(1), "a note "+id), nil, quota)
		full := id == "m4"
		if errors.Is(err, memory.ErrQuotaExceeded) != full || (!full && err != nil) {
			t.Errorf("put %s with 2 of 5 memories held before m1 = %v", id, err)
		}
	}
}

// PutDocuments of one document at the same time, each of other chunks, leave the chunks of one
// of them, never some of each.
func testPutDocumentConcurrent(t *testing.T, s memory.Store) {
	const writers, chunks, rounds = 4, 5, 5
	for round := range rounds {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				doc := make([]*memoryv1.Memory, chunks)
				for i := range doc {
					id := fmt.Sprintf("r%d-w%d-c%d", round, w, i)
					doc[i] = folderChunk(t, id, "docs", "a.md", i,
						fmt.Sprintf("round %d writer %d chunk %d", round, w, i))
				}
				if _, err := s.PutDocument(t.Context(), document(t, doc...), 100); err != nil {
					t.Errorf("put writer %d's document: %v", w, err)
				}
			})
		}
		wg.Wait()
		got := list(t, s, "alice", "knowledge")
		writer := make(map[string]int)
		for _, m := range got {
			writer[strings.Split(m.GetId(), "-c")[0]]++
		}
		if len(got) != chunks || len(writer) != 1 {
			t.Fatalf("round %d: the collection holds %d chunks of %d writers (%v), want the %d "+
				"of one", round, len(got), len(writer), writer, chunks)
		}
	}
}

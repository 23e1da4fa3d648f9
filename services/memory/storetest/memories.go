package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/protobuf/proto"
)

// Every field of a memory round-trips; List is newest first.
func testPutAndList(t *testing.T, s memory.Store) {
	var stored []*memoryv1.Memory
	for i, text := range []string{"first note", "second note", "third note"} {
		m := newMemory(t, "alice", "", fmt.Sprintf("m%d", i), at(i), text)
		put(t, s, m, nil)
		stored = append(stored, m)
	}
	got := list(t, s, "alice", "")
	want := []*memoryv1.Memory{stored[2], stored[1], stored[0]}
	if len(got) != len(want) {
		t.Fatalf("listed %v, want %v", memoryIDs(got), memoryIDs(want))
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("listed[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if got := list(t, s, "nobody", ""); len(got) != 0 {
		t.Errorf("an unknown user lists %v", memoryIDs(got))
	}
}

// The store keeps its own copies: changing a value passed in or returned changes nothing.
func testCopies(t *testing.T, s memory.Store) {
	m := newMemory(t, "alice", "", "m1", at(1), "the launch code is swordfish")
	vector := []float32{1, 0}
	put(t, s, m, vector)
	m.Content = "changed after put"
	m.GetMetadata().GetFields()["title"] = nil
	vector[0], vector[1] = 0, 1

	listed := list(t, s, "alice", "")
	listed[0].Content = "changed after list"
	hits := search(t, s, memory.SearchQuery{UserID: "alice", Query: "launch code", Vector: []float32{1, 0}})
	if len(hits) != 1 {
		t.Fatalf("hits = %v", hitIDs(hits))
	}
	if s := hits[0].GetRelevanceScore(); s < 0.999 {
		t.Errorf("score = %v: the stored vector changed with the caller's slice", s)
	}
	hits[0].Memory.Content = "changed after search"

	again := list(t, s, "alice", "")
	if len(again) != 1 || again[0].GetContent() != "the launch code is swordfish" || again[0].GetMetadata().GetFields()["title"].GetStringValue() != "T m1" {
		t.Errorf("stored memory changed: %v", again)
	}
}

// No query of one user reaches another user's memories.
func testIsolation(t *testing.T, s memory.Store) {
	ctx := t.Context()
	put(t, s, newMemory(t, "alice", "", "a1", at(1), "Alice's secret project is called Bluebird"), []float32{1, 0})
	put(t, s, newMemory(t, "bob", "", "b1", at(2), "Bob likes hiking in the Alps"), []float32{0, 1})

	if hits := search(t, s, memory.SearchQuery{UserID: "bob", Query: "secret project bluebird"}); len(hits) != 0 {
		t.Errorf("bob's lexical search found %v", hitIDs(hits))
	}
	if hits := search(t, s, memory.SearchQuery{UserID: "bob", Query: "secret", Vector: []float32{1, 0}}); len(hits) != 0 {
		t.Errorf("bob's semantic search found %v", hitIDs(hits))
	}
	if got := memoryIDs(list(t, s, "bob", "")); !slices.Equal(got, []string{"b1"}) {
		t.Errorf("bob lists %v", got)
	}
	if hits := search(t, s, memory.SearchQuery{UserID: "alice", Query: "bluebird"}); !slices.Equal(hitIDs(hits), []string{"a1"}) {
		t.Errorf("alice found %v", hitIDs(hits))
	}
	if err := s.DeleteMemory(ctx, "bob", "a1"); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("bob deleting alice's memory: %v, want ErrNotFound", err)
	}
	if got := memoryIDs(list(t, s, "alice", "")); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("alice lists %v after bob's delete", got)
	}
}

// Collections are listed and searched separately.
func testCollections(t *testing.T, s memory.Store) {
	put(t, s, newMemory(t, "u", "", "p1", at(1), "personal database note"), nil)
	put(t, s, newMemory(t, "u", "kb", "k1", at(2), "database database in the knowledge base"), nil)
	if got := memoryIDs(list(t, s, "u", "kb")); !slices.Equal(got, []string{"k1"}) {
		t.Errorf("kb lists %v", got)
	}
	if got := memoryIDs(list(t, s, "u", "")); !slices.Equal(got, []string{"p1"}) {
		t.Errorf("personal lists %v", got)
	}
	if got := hitIDs(search(t, s, memory.SearchQuery{UserID: "u", Collection: "kb", Query: "database"})); !slices.Equal(got, []string{"k1"}) {
		t.Errorf("kb search = %v", got)
	}
	if got := hitIDs(search(t, s, memory.SearchQuery{UserID: "u", Query: "database"})); !slices.Equal(got, []string{"p1"}) {
		t.Errorf("personal search = %v", got)
	}
}

// The quota counts a user's memories over all collections; a delete frees a slot.
func testQuota(t *testing.T, s memory.Store) {
	ctx := t.Context()
	const quota = 2
	if err := s.PutMemory(ctx, newMemory(t, "alice", "", "a1", at(1), "one"), nil, quota); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMemory(ctx, newMemory(t, "alice", "docs", "a2", at(2), "two"), nil, quota); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMemory(ctx, newMemory(t, "alice", "", "a3", at(3), "three"), nil, quota); !errors.Is(err, memory.ErrQuotaExceeded) {
		t.Fatalf("third memory: %v, want ErrQuotaExceeded", err)
	}
	if got := list(t, s, "alice", ""); len(got) != 1 {
		t.Errorf("the refused memory was stored: %v", memoryIDs(got))
	}
	if err := s.PutMemory(ctx, newMemory(t, "bob", "", "b1", at(4), "bob's quota is his own"), nil, quota); err != nil {
		t.Errorf("bob: %v", err)
	}
	if err := s.DeleteMemory(ctx, "alice", "a1"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMemory(ctx, newMemory(t, "alice", "", "a3", at(3), "three, after a delete"), nil, quota); err != nil {
		t.Errorf("after a delete: %v", err)
	}
	if err := s.PutMemory(ctx, newMemory(t, "alice", "", "a4", at(4), "four"), nil, quota); !errors.Is(err, memory.ErrQuotaExceeded) {
		t.Errorf("over the quota again: %v, want ErrQuotaExceeded", err)
	}
}

// Concurrent puts never exceed the quota.
func testQuotaConcurrent(t *testing.T, s memory.Store) {
	const quota = 10
	var ok, full atomic.Int32
	var wg sync.WaitGroup
	for i := range 3 * quota {
		wg.Go(func() {
			err := s.PutMemory(t.Context(), newMemory(t, "alice", "", fmt.Sprintf("m%02d", i), at(i), fmt.Sprintf("fact %d", i)), nil, quota)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, memory.ErrQuotaExceeded):
				full.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != quota || full.Load() != 2*quota {
		t.Errorf("stored %d, refused %d; want %d and %d", ok.Load(), full.Load(), quota, 2*quota)
	}
	if got := list(t, s, "alice", ""); len(got) != quota {
		t.Errorf("%d memories stored, want %d", len(got), quota)
	}
}

// A deleted memory is gone from lists and searches; deleting it again is ErrNotFound.
func testDelete(t *testing.T, s memory.Store) {
	ctx := t.Context()
	put(t, s, newMemory(t, "u", "", "m1", at(1), "the cat sat on the mat"), []float32{1, 0})
	put(t, s, newMemory(t, "u", "", "m2", at(2), "the dog sat on the log"), []float32{0, 1})
	if err := s.DeleteMemory(ctx, "u", "m1"); err != nil {
		t.Fatal(err)
	}
	if got := memoryIDs(list(t, s, "u", "")); !slices.Equal(got, []string{"m2"}) {
		t.Errorf("list = %v", got)
	}
	if got := hitIDs(search(t, s, memory.SearchQuery{UserID: "u", Query: "cat sat", Vector: []float32{1, 0}})); !slices.Equal(got, []string{"m2"}) {
		t.Errorf("search = %v, want only m2 (it shares \"sat\")", got)
	}
	for _, id := range []string{"m1", "never-stored"} {
		if err := s.DeleteMemory(ctx, "u", id); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("delete %s: %v, want ErrNotFound", id, err)
		}
	}
}

// Pages follow each other without gaps or repeats.
func testPaging(t *testing.T, s memory.Store) {
	var stored []string
	for i := range 7 {
		id := fmt.Sprintf("m%d", i)
		put(t, s, newMemory(t, "u", "", id, at(i), "memory "+id), nil)
		stored = append(stored, id)
	}
	slices.Reverse(stored)
	var listed []string
	var after *memory.Cursor
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("paging does not end")
		}
		page, err := s.ListMemories(t.Context(), memory.ListQuery{UserID: "u", After: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		listed = append(listed, memoryIDs(page)...)
		last := page[len(page)-1]
		after = &memory.Cursor{CreatedAt: last.GetCreatedAt().AsTime(), ID: last.GetId()}
	}
	if !slices.Equal(listed, stored) {
		t.Errorf("listed %v, want %v", listed, stored)
	}
}

// Memories created in the same instant page by id, descending.
func testPagingSameInstant(t *testing.T, s memory.Store) {
	ids := []string{"0190-a", "0190-b", "0190-B", "0190-c", "0191"}
	for _, id := range ids {
		put(t, s, newMemory(t, "u", "", id, at(0), "memory "+id), nil)
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	slices.Reverse(want)
	var listed []string
	var after *memory.Cursor
	for range len(ids) + 1 {
		page, err := s.ListMemories(t.Context(), memory.ListQuery{UserID: "u", After: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		listed = append(listed, memoryIDs(page)...)
		after = &memory.Cursor{CreatedAt: at(0), ID: page[len(page)-1].GetId()}
	}
	if !slices.Equal(listed, want) {
		t.Errorf("listed %v, want %v (byte order of ids, descending)", listed, want)
	}
}

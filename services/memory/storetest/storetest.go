// Package storetest is the conformance suite of memory.Store implementations: every store
// runs the same tests, so the in-memory, SQLite and PostgreSQL stores behave alike. Use it
// from a store's tests:
//
//	func TestSQLiteStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) memory.Store { ... a new, empty store ... })
//		storetest.RunRestart(t, func(t *testing.T) memory.Store { ... the same database ... })
//	}
//
// PostgresDSN gives each test its own PostgreSQL schema in the test database.
package storetest

import (
	"fmt"
	"io"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Run runs the conformance suite. newStore must return a new, empty store on every call and
// release it when t ends (t.Cleanup).
func Run(t *testing.T, newStore func(t *testing.T) memory.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s memory.Store)
	}{
		{"PutAndList", testPutAndList},
		{"Copies", testCopies},
		{"Isolation", testIsolation},
		{"Collections", testCollections},
		{"Quota", testQuota},
		{"QuotaConcurrent", testQuotaConcurrent},
		{"Delete", testDelete},
		{"Paging", testPaging},
		{"PagingSameInstant", testPagingSameInstant},
		{"SearchLexical", testSearchLexical},
		{"SearchTies", testSearchTies},
		{"SearchSemantic", testSearchSemantic},
		{"SearchManyTerms", testSearchManyTerms},
		{"SearchUnspaced", testSearchUnspaced},
		{"Transcript", testTranscript},
		{"TranscriptConcurrent", testTranscriptConcurrent},
		{"Runs", testRuns},
		{"Duplicate", testDuplicate},
		{"DocumentChunks", testDocumentChunks},
		{"DocumentChunksConcurrent", testDocumentChunksConcurrent},
		{"PutDocument", testPutDocument},
		{"PutDocumentConcurrent", testPutDocumentConcurrent},
		{"LearningQueue", testLearningQueue},
		{"LearningConcurrent", testLearningConcurrent},
		{"LearningTrace", testLearningTrace},
		{"LearningClaimEnd", testLearningClaimEnd},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// base is the creation time of the first memory of a test; at(i) is i seconds later.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }

// newMemory returns a memory with every field set.
func newMemory(t *testing.T, user, collection, id string, created time.Time, content string) *memoryv1.Memory {
	t.Helper()
	meta, err := structpb.NewStruct(map[string]any{"title": "T " + id, "source": "notes/" + id + ".md", "chunk": 1})
	if err != nil {
		t.Fatal(err)
	}
	return &memoryv1.Memory{
		Id:             id,
		UserId:         user,
		ConversationId: "conv-" + id,
		Collection:     collection,
		Content:        content,
		Metadata:       meta,
		CreatedAt:      timestamppb.New(created),
		Importance:     0.4,
	}
}

// put stores m with vector under a quota that never binds.
func put(t *testing.T, s memory.Store, m *memoryv1.Memory, vector []float32) {
	t.Helper()
	if err := s.PutMemory(t.Context(), m, vector, 1_000_000); err != nil {
		t.Fatalf("put %s: %v", m.GetId(), err)
	}
}

// list returns every memory of user in collection, newest first.
func list(t *testing.T, s memory.Store, user, collection string) []*memoryv1.Memory {
	t.Helper()
	page, err := s.ListMemories(t.Context(), memory.ListQuery{UserID: user, Collection: collection, Limit: 10_000})
	if err != nil {
		t.Fatalf("list %s/%q: %v", user, collection, err)
	}
	return page
}

func memoryIDs(ms []*memoryv1.Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GetId()
	}
	return out
}

func hitIDs(hits []*memoryv1.MemoryHit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.GetMemory().GetId()
	}
	return out
}

func search(t *testing.T, s memory.Store, q memory.SearchQuery) []*memoryv1.MemoryHit {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 100
	}
	hits, err := s.SearchMemories(t.Context(), q)
	if err != nil {
		t.Fatalf("search %+v: %v", q, err)
	}
	return hits
}

// chain builds n linked transcript entries starting at seq first after prevHash.
func chain(first int64, prevHash string, n int) []*typev1.TranscriptEntry {
	var out []*typev1.TranscriptEntry
	for i := range int64(n) {
		seq := first + i
		h := fmt.Sprintf("h%d", seq)
		out = append(out, &typev1.TranscriptEntry{Seq: seq, PrevHash: prevHash, Hash: h, State: typev1.RunState(1)})
		prevHash = h
	}
	return out
}

// closeStore closes s, which must be an io.Closer.
func closeStore(t *testing.T, s memory.Store) {
	t.Helper()
	c, ok := s.(io.Closer)
	if !ok {
		t.Fatalf("%T has no Close method: it cannot be restarted", s)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

package memory

import (
	"context"
	"slices"
	"sync"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
)

// MemoryStore is a Store that keeps everything in process memory; its contents are lost when
// the process ends. It is safe for concurrent use. Values are cloned on the way in and out.
type MemoryStore struct {
	mu          sync.RWMutex
	memories    map[string]map[string]document // user → memory id → memory
	transcripts map[string][]*typev1.TranscriptEntry
	runs        map[string]*typev1.RunResult
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		memories:    make(map[string]map[string]document),
		transcripts: make(map[string][]*typev1.TranscriptEntry),
		runs:        make(map[string]*typev1.RunResult),
	}
}

// PutMemory stores a copy of m unless its user already holds quota memories.
func (s *MemoryStore) PutMemory(_ context.Context, m *memoryv1.Memory, quota int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	user := s.memories[m.GetUserId()]
	if len(user) >= quota {
		return ErrQuotaExceeded
	}
	if user == nil {
		user = make(map[string]document)
		s.memories[m.GetUserId()] = user
	}
	user[m.GetId()] = newDocument(proto.CloneOf(m))
	return nil
}

// SearchMemories ranks the user's memories in the collection with BM25.
func (s *MemoryStore) SearchMemories(_ context.Context, q SearchQuery) ([]*memoryv1.MemoryHit, error) {
	s.mu.RLock()
	var docs []document
	for _, d := range s.memories[q.UserID] {
		if d.memory.GetCollection() == q.Collection {
			docs = append(docs, d)
		}
	}
	s.mu.RUnlock()

	hits := rankBM25(q.Query, docs)
	hits = slices.DeleteFunc(hits, func(h *memoryv1.MemoryHit) bool { return h.GetRelevanceScore() < q.MinScore })
	hits = hits[:min(len(hits), q.Limit)]
	for _, h := range hits {
		h.Memory = proto.CloneOf(h.GetMemory())
	}
	return hits, nil
}

// ListMemories pages through the user's memories in the collection, newest first.
func (s *MemoryStore) ListMemories(_ context.Context, q ListQuery) ([]*memoryv1.Memory, error) {
	s.mu.RLock()
	var page []*memoryv1.Memory
	for _, d := range s.memories[q.UserID] {
		m := d.memory
		if m.GetCollection() != q.Collection {
			continue
		}
		if q.After != nil && !q.After.Before(m.GetCreatedAt().AsTime(), m.GetId()) {
			continue
		}
		page = append(page, m)
	}
	s.mu.RUnlock()

	slices.SortFunc(page, newerFirst)
	page = page[:min(len(page), q.Limit)]
	for i, m := range page {
		page[i] = proto.CloneOf(m)
	}
	return page, nil
}

// DeleteMemory deletes the user's memory id.
func (s *MemoryStore) DeleteMemory(_ context.Context, userID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	user := s.memories[userID]
	if _, ok := user[id]; !ok {
		return ErrNotFound
	}
	delete(user, id)
	return nil
}

// AppendTranscript appends entries that continue the run's stored chain.
func (s *MemoryStore) AppendTranscript(_ context.Context, runID string, entries []*typev1.TranscriptEntry) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chain := s.transcripts[runID]
	var last string
	if len(chain) > 0 {
		last = chain[len(chain)-1].GetHash()
	}
	if err := VerifyAppend(int64(len(chain)), last, entries); err != nil {
		return 0, err
	}
	for _, e := range entries {
		chain = append(chain, proto.CloneOf(e))
	}
	s.transcripts[runID] = chain
	return int64(len(chain)), nil
}

// SaveRun stores a copy of the run's result.
func (s *MemoryStore) SaveRun(_ context.Context, _ string, result *typev1.RunResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs[result.GetRunId()] = proto.CloneOf(result)
	return nil
}

// GetRun returns a copy of the run's result with the stored transcript.
func (s *MemoryStore) GetRun(_ context.Context, runID string) (*typev1.RunResult, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	stored, ok := s.runs[runID]
	if !ok {
		return nil, ErrNotFound
	}
	result := proto.CloneOf(stored)
	if chain := s.transcripts[runID]; len(chain) > 0 {
		result.Transcript = make([]*typev1.TranscriptEntry, len(chain))
		for i, e := range chain {
			result.Transcript[i] = proto.CloneOf(e)
		}
	}
	return result, nil
}

package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"
)

// MemoryStore is a Store that keeps everything in process memory; its contents are lost when
// the process ends. It is safe for concurrent use. Values are copied on the way in and out.
// It keeps the finished runs its Retention allows, forgetting the oldest first.
//
// It keeps runs and transcripts as their protobuf encodings, decoded when read: a run's
// result and transcript are hundreds of objects (its conversation, its entries' hashes), and
// the thousand runs kept by default were most of what the garbage collector marked on every
// cycle of a busy process; as bytes they are a few objects with nothing in them to scan, and
// smaller (issue 15).
type MemoryStore struct {
	mu          sync.RWMutex
	memories    map[string]map[string]memoryRecord    // user → memory id → memory
	chunks      map[string]map[string]string          // user → documentKey → memory id
	documents   map[string]map[string]map[string]bool // user → DocumentName → memory ids
	transcripts map[string]*storedChain
	runs        map[string]storedRun
	saved       []string               // the runs' ids, in the order they were first saved
	learning    map[string]*learnState // run id → its learning
	queue       []*learnState          // the runs queued for learning, in the order queued
	keep        Retention
	now         func() time.Time
}

// Retention bounds the finished runs a MemoryStore keeps: at most MaxRuns (0: any number),
// none saved longer than MaxAge ago (0: forever). A run it forgets goes with its transcript
// and its learning.
type Retention struct {
	MaxRuns int
	MaxAge  time.Duration
}

// learnState is the learning of one saved run.
type learnState struct {
	job          LearnJob
	claimedUntil time.Time // zero when unclaimed
	done         bool
	learned      *typev1.RunLearning
}

// memoryRecord is a memory with what ranking needs of it.
type memoryRecord struct {
	memory *memoryv1.Memory
	doc    rankDoc
	key    string // documentKey of memory
	name   string // DocumentName of memory
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty in-memory store that keeps every run.
func NewMemoryStore() *MemoryStore { return NewMemoryStoreKeeping(Retention{}) }

// NewMemoryStoreKeeping returns an empty in-memory store that keeps the runs keep allows.
func NewMemoryStoreKeeping(keep Retention) *MemoryStore {
	return &MemoryStore{
		memories:    make(map[string]map[string]memoryRecord),
		chunks:      make(map[string]map[string]string),
		documents:   make(map[string]map[string]map[string]bool),
		transcripts: make(map[string]*storedChain),
		runs:        make(map[string]storedRun),
		learning:    make(map[string]*learnState),
		keep:        keep,
		now:         time.Now,
	}
}

// forget drops the runs the retention no longer allows, oldest first. s.mu is held.
func (s *MemoryStore) forget() {
	drop := 0
	for drop < len(s.saved) {
		id := s.saved[drop]
		over := s.keep.MaxRuns > 0 && len(s.saved)-drop > s.keep.MaxRuns
		if !over && !s.expired(s.runs[id].at) {
			break
		}
		delete(s.runs, id)
		delete(s.transcripts, id)
		delete(s.learning, id)
		drop++
	}
	if drop > 0 {
		s.saved = slices.Delete(s.saved, 0, drop)
	}
}

// PutMemory stores a copy of m and its vector unless its user already holds quota memories;
// a chunk of a document replaces the user's memory with the same documentKey.
func (s *MemoryStore) PutMemory(_ context.Context, m *memoryv1.Memory, vector []float32, quota int) error {
	r := newMemoryRecord(m, vector)
	s.mu.Lock()
	defer s.mu.Unlock()
	userID := m.GetUserId()
	replaced, found := "", false
	if r.key != "" {
		replaced, found = s.chunks[userID][r.key]
	}
	if quota < 1 || (!found && len(s.memories[userID]) >= quota) {
		return ErrQuotaExceeded
	}
	if found {
		s.remove(userID, replaced)
	}
	s.add(userID, r)
	return nil
}

// PutDocument replaces the user's chunks of the document, and those with the documentKey of
// one of its chunks, with its chunks, in one critical section: a concurrent PutDocument of the
// same document comes wholly before or after it.
func (s *MemoryStore) PutDocument(_ context.Context, doc Document, quota int) ([]string, error) {
	records := make([]memoryRecord, len(doc.Chunks))
	for i, m := range doc.Chunks {
		records[i] = newMemoryRecord(m, doc.vector(i))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gone := maps.Clone(s.documents[doc.UserID][doc.Name])
	if gone == nil {
		gone = make(map[string]bool)
	}
	for _, r := range records {
		if id, ok := s.chunks[doc.UserID][r.key]; ok {
			gone[id] = true
		}
	}
	if added := len(records) - len(gone); added > 0 && len(s.memories[doc.UserID])+added > quota {
		return nil, ErrQuotaExceeded
	}
	replaced := slices.Sorted(maps.Keys(gone))
	for _, id := range replaced {
		s.remove(doc.UserID, id)
	}
	for _, r := range records {
		s.add(doc.UserID, r)
	}
	return replaced, nil
}

// newMemoryRecord returns the record of a copy of m with its vector.
func newMemoryRecord(m *memoryv1.Memory, vector []float32) memoryRecord {
	freq, length := termFrequencies(m.GetContent())
	return memoryRecord{
		memory: proto.CloneOf(m),
		doc: rankDoc{
			id:        m.GetId(),
			createdAt: m.GetCreatedAt().AsTime().UnixNano(),
			length:    length,
			freq:      freq,
			vector:    slices.Clone(vector),
		},
		key:  documentKey(m),
		name: DocumentName(m),
	}
}

// add keeps r, a memory of userID, and indexes it by its documentKey and DocumentName. s.mu is
// held.
func (s *MemoryStore) add(userID string, r memoryRecord) {
	if s.memories[userID] == nil {
		s.memories[userID] = make(map[string]memoryRecord)
	}
	id := r.memory.GetId()
	s.memories[userID][id] = r
	if r.key != "" {
		if s.chunks[userID] == nil {
			s.chunks[userID] = make(map[string]string)
		}
		s.chunks[userID][r.key] = id
	}
	if r.name != "" {
		if s.documents[userID] == nil {
			s.documents[userID] = make(map[string]map[string]bool)
		}
		if s.documents[userID][r.name] == nil {
			s.documents[userID][r.name] = make(map[string]bool)
		}
		s.documents[userID][r.name][id] = true
	}
}

// remove drops the memory id of userID and its index entries, reporting whether there was
// one. s.mu is held.
func (s *MemoryStore) remove(userID, id string) bool {
	r, ok := s.memories[userID][id]
	if !ok {
		return false
	}
	delete(s.memories[userID], id)
	if r.key != "" && s.chunks[userID][r.key] == id {
		delete(s.chunks[userID], r.key)
	}
	if r.name != "" {
		delete(s.documents[userID][r.name], id)
		if len(s.documents[userID][r.name]) == 0 {
			delete(s.documents[userID], r.name)
		}
	}
	return true
}

// SearchMemories ranks the user's memories in the collection.
func (s *MemoryStore) SearchMemories(_ context.Context, q SearchQuery) ([]*memoryv1.MemoryHit, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var c corpus
	var docs []rankDoc
	for _, m := range s.memories[q.UserID] {
		if m.memory.GetCollection() == q.Collection {
			c.docs++
			c.totalLength += int64(m.doc.length)
			docs = append(docs, m.doc)
		}
	}
	ranked := rank(q, queryTerms(q.Query), c, docs)
	hits := make([]*memoryv1.MemoryHit, len(ranked))
	for i, r := range ranked {
		hits[i] = &memoryv1.MemoryHit{Memory: proto.CloneOf(s.memories[q.UserID][r.id].memory), RelevanceScore: r.score}
	}
	return hits, nil
}

// ListMemories pages through the user's memories in the collection, newest first.
func (s *MemoryStore) ListMemories(_ context.Context, q ListQuery) ([]*memoryv1.Memory, error) {
	s.mu.RLock()
	var page []*memoryv1.Memory
	for _, st := range s.memories[q.UserID] {
		m := st.memory
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

// newerFirst orders memories newest first: by creation time, then by id, both descending.
func newerFirst(a, b *memoryv1.Memory) int {
	if c := b.GetCreatedAt().AsTime().Compare(a.GetCreatedAt().AsTime()); c != 0 {
		return c
	}
	return cmp.Compare(b.GetId(), a.GetId())
}

// DeleteMemory deletes the user's memory id.
func (s *MemoryStore) DeleteMemory(_ context.Context, userID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.remove(userID, id) {
		return ErrNotFound
	}
	return nil
}

// storedChain is a run's stored transcript: its entries' encodings, each length-prefixed
// (protodelim), and what appending to it checks.
type storedChain struct {
	entries  []byte
	length   int64
	lastHash string
}

// AppendTranscript appends entries that continue the run's stored chain.
func (s *MemoryStore) AppendTranscript(_ context.Context, runID string, entries []*typev1.TranscriptEntry) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chain := s.transcripts[runID]
	if chain == nil {
		chain = &storedChain{}
	}
	if err := VerifyAppend(chain.length, chain.lastHash, entries); err != nil {
		return 0, err
	}
	records := bytes.NewBuffer(chain.entries)
	for _, e := range entries {
		if _, err := protodelim.MarshalTo(records, e); err != nil {
			return 0, fmt.Errorf("encode transcript entry %d: %w", e.GetSeq(), err)
		}
	}
	if n := len(entries); n > 0 {
		chain.entries, chain.length, chain.lastHash = records.Bytes(), chain.length+int64(n), entries[n-1].GetHash()
	}
	s.transcripts[runID] = chain
	return chain.length, nil
}

// expired reports whether a run first saved at is older than the retention keeps. s.mu is held.
func (s *MemoryStore) expired(at time.Time) bool {
	return s.keep.MaxAge > 0 && s.now().Sub(at) > s.keep.MaxAge
}

// storedRun is a saved run result, encoded without its learning (encodeResult), and the user
// it acted for.
type storedRun struct {
	result []byte
	userID string
	at     time.Time // when it was first saved, which its retention's age counts from
}

// SaveRun stores the run's result without its learning, and queues the run for learning the
// first time, with ctx's trace context.
func (s *MemoryStore) SaveRun(ctx context.Context, userID string, result *typev1.RunResult) error {
	stored, err := encodeResult(result)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.now()
	if earlier, ok := s.runs[result.GetRunId()]; ok {
		at = earlier.at
	} else {
		s.saved = append(s.saved, result.GetRunId())
	}
	s.runs[result.GetRunId()] = storedRun{result: stored, userID: userID, at: at}
	defer s.forget()
	if _, ok := s.learning[result.GetRunId()]; !ok {
		l := &learnState{job: LearnJob{RunID: result.GetRunId(), UserID: userID}}
		l.job.Traceparent, l.job.Tracestate = telemetry.TraceContextOf(ctx)
		s.learning[result.GetRunId()] = l
		s.queue = append(s.queue, l)
	}
	return nil
}

// GetRun returns a copy of the run's result with the stored transcript, and its user.
func (s *MemoryStore) GetRun(_ context.Context, runID string) (*typev1.RunResult, string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	stored, ok := s.runs[runID]
	if !ok || s.expired(stored.at) {
		return nil, "", ErrNotFound // forgotten, or due to be at the next save (forget)
	}
	result := &typev1.RunResult{}
	if err := proto.Unmarshal(stored.result, result); err != nil {
		return nil, "", fmt.Errorf("stored result of run %s: %w", runID, err)
	}
	if chain := s.transcripts[runID]; chain != nil && chain.length > 0 {
		entries, err := decodeEntries(chain.entries)
		if err != nil {
			return nil, "", fmt.Errorf("run %s: %w", runID, err)
		}
		result.Transcript = entries
	}
	if l := s.learning[runID]; l != nil && l.learned != nil {
		result.Learning = proto.CloneOf(l.learned)
	}
	return result, stored.userID, nil
}

// DuplicateMemory returns the memory of the user's collection that holds what q.Query says.
func (s *MemoryStore) DuplicateMemory(_ context.Context, q SearchQuery, minCosine float64) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var docs []rankDoc
	for _, m := range s.memories[q.UserID] {
		if m.memory.GetCollection() == q.Collection {
			docs = append(docs, m.doc)
		}
	}
	return duplicate(q, minCosine, docs), nil
}

// ClaimLearning claims the earliest queued run that no claim holds at now. The runs learned
// from or forgotten leave the queue as they reach its head, so a claim looks at the runs
// still to learn from, not at every run kept (issue 15: each claim scanned the thousand runs
// the store keeps by default).
func (s *MemoryStore) ClaimLearning(_ context.Context, now time.Time, lease time.Duration) (LearnJob, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.queue) > 0 && s.settled(s.queue[0]) {
		s.queue[0] = nil
		s.queue = s.queue[1:]
	}
	if len(s.queue) == 0 {
		s.queue = nil // let the backing array go
	}
	for _, l := range s.queue {
		if !s.settled(l) && !l.claimedUntil.After(now) {
			l.claimedUntil = now.Add(lease)
			l.job.Attempts++
			return l.job, true, nil
		}
	}
	return LearnJob{}, false, nil
}

// NextClaimEnd returns the earliest end, after now, of a claim on a queued run.
func (s *MemoryStore) NextClaimEnd(_ context.Context, now time.Time) (time.Time, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var end time.Time
	for _, l := range s.queue {
		if !s.settled(l) && l.claimedUntil.After(now) && (end.IsZero() || l.claimedUntil.Before(end)) {
			end = l.claimedUntil
		}
	}
	return end, !end.IsZero(), nil
}

// settled reports whether the queued run l needs no learning any more: learned from, or
// forgotten. s.mu is held.
func (s *MemoryStore) settled(l *learnState) bool {
	return l.done || s.learning[l.job.RunID] != l
}

// FinishLearning records the run's learning and takes it off the queue.
func (s *MemoryStore) FinishLearning(_ context.Context, runID string, learned *typev1.RunLearning) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.learning[runID]
	if l == nil {
		return ErrNotFound
	}
	l.done, l.learned = true, proto.CloneOf(learned)
	return nil
}

// ReleaseLearning ends the claim on the run.
func (s *MemoryStore) ReleaseLearning(_ context.Context, runID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.learning[runID]; l != nil {
		l.claimedUntil = time.Time{}
	}
	return nil
}

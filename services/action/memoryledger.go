package action

import (
	"container/list"
	"context"
	"sync"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"github.com/nats-io/nuid"
	"google.golang.org/protobuf/proto"
)

// callKey identifies a tool call across the mesh.
type callKey struct {
	runID, callID string
}

// DefaultCacheBytes bounds the encoded size of the done records of the in-memory ledger: a
// tool's result may be up to 8 MiB, and DefaultCacheSize of them would be 80 GiB.
const DefaultCacheBytes = 256 << 20

// memoryLedger is a Ledger in the process's memory, for a stage without NATS: a bounded LRU
// of records. When it holds more than size records, or records of more than maxBytes, it
// evicts the least recently used done records; started records, one per call in progress,
// are never evicted, nor is the record just written. (container/list rather than pkg/lru:
// the records a call in progress holds are never evicted, which an LRU of its own cannot
// tell.)
type memoryLedger struct {
	instance string // every started record is this process's
	mu       sync.Mutex
	size     int
	maxBytes int64
	bytes    int64      // the encoded size of the records held
	revision uint64     // of the last write
	order    *list.List // front is most recently used; values are *memoryRecord
	records  map[callKey]*list.Element
	changed  chan struct{} // closed, and replaced, by every write
}

type memoryRecord struct {
	key      callKey
	rec      *actionv1.CallRecord
	revision uint64
	bytes    int64 // rec's encoded size
}

// newMemoryLedger returns an empty ledger of at most size records, of DefaultCacheBytes.
func newMemoryLedger(size int) *memoryLedger {
	return &memoryLedger{instance: "local-" + nuid.Next(), size: size, maxBytes: DefaultCacheBytes,
		order: list.New(), records: make(map[callKey]*list.Element), changed: make(chan struct{})}
}

// Instance names this process.
func (l *memoryLedger) Instance(context.Context) (string, error) { return l.instance, nil }

// Alive reports whether instance is this process: no other can write to this ledger.
func (l *memoryLedger) Alive(_ context.Context, instance string) (bool, error) {
	return instance == l.instance, nil
}

// Get returns a copy of the call's record and marks it recently used.
func (l *memoryLedger) Get(_ context.Context, runID, callID string) (*actionv1.CallRecord, uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, ok := l.records[callKey{runID, callID}]
	if !ok {
		return nil, 0, ErrNoRecord
	}
	l.order.MoveToFront(el)
	r := el.Value.(*memoryRecord)
	return proto.CloneOf(r.rec), r.revision, nil
}

// Put stores a copy of rec if the call's record is at revision.
func (l *memoryLedger) Put(_ context.Context, rec *actionv1.CallRecord, revision uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := callKey{rec.GetRunId(), rec.GetCallId()}
	if l.revisionOf(key) != revision {
		return 0, ErrRecordChanged
	}
	l.revision++
	r := &memoryRecord{key: key, rec: proto.CloneOf(rec), revision: l.revision, bytes: int64(proto.Size(rec))}
	l.bytes += r.bytes
	if el, ok := l.records[key]; ok {
		l.bytes -= el.Value.(*memoryRecord).bytes
		el.Value = r
		l.order.MoveToFront(el)
	} else {
		l.records[key] = l.order.PushFront(r)
	}
	l.evict()
	close(l.changed)
	l.changed = make(chan struct{})
	return r.revision, nil
}

// Wait waits for a write that moves the call's record off revision.
func (l *memoryLedger) Wait(ctx context.Context, runID, callID string, revision uint64) error {
	key := callKey{runID, callID}
	for {
		l.mu.Lock()
		current, changed := l.revisionOf(key), l.changed
		l.mu.Unlock()
		if current != revision {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// revisionOf returns the revision of key's record, 0 when it has none. l.mu is held.
func (l *memoryLedger) revisionOf(key callKey) uint64 {
	if el, ok := l.records[key]; ok {
		return el.Value.(*memoryRecord).revision
	}
	return 0
}

// evict drops least recently used done records, never the one just written (the front),
// while the ledger holds more than its size or more than its bytes. l.mu is held.
func (l *memoryLedger) evict() {
	for el := l.order.Back(); el != l.order.Front() && (l.order.Len() > l.size || l.bytes > l.maxBytes); {
		prev := el.Prev()
		if r := el.Value.(*memoryRecord); r.rec.GetState() == actionv1.CallState_CALL_STATE_DONE {
			l.order.Remove(el)
			delete(l.records, r.key)
			l.bytes -= r.bytes
		}
		el = prev
	}
}

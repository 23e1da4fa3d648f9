package orchestrator

import (
	"context"
	"sync"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"google.golang.org/protobuf/proto"
)

// eventQueue hands a run's events to a streaming caller without ever blocking the run: pushes
// append, pops wait. It holds at most limit bytes of encoded events: a caller that reads more
// slowly than its run emits (or stops reading) would have every event of the run held for it.
// Past the limit it holds nothing more, and pop reports it overflowed once the events it
// held are taken.
type eventQueue struct {
	mu         sync.Mutex
	items      []queued
	size       int // encoded bytes of items
	limit      int
	overflowed bool
	notify     chan struct{}
}

// queued is an event the queue holds, and its encoded size.
type queued struct {
	ev   *eventv1.RunEvent
	size int
}

func newEventQueue(limit int) *eventQueue {
	return &eventQueue{notify: make(chan struct{}, 1), limit: limit}
}

func (q *eventQueue) push(ev *eventv1.RunEvent) {
	n := proto.Size(ev)
	q.mu.Lock()
	switch {
	case q.overflowed:
	case q.size+n > q.limit && len(q.items) > 0: // one event alone is always held
		q.overflowed, q.items, q.size = true, nil, 0
	default:
		q.items = append(q.items, queued{ev: ev, size: n})
		q.size += n
	}
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// pop returns the next event, waiting for one; ok false when ctx ends or stop closes first,
// or (overflowed) when the queue outgrew its limit: the events it held then are dropped.
func (q *eventQueue) pop(ctx context.Context, stop <-chan struct{}) (ev *eventv1.RunEvent, ok, overflowed bool) {
	for {
		q.mu.Lock()
		if q.overflowed {
			q.mu.Unlock()
			return nil, false, true
		}
		if len(q.items) > 0 {
			next := q.items[0]
			q.items[0] = queued{}
			q.items = q.items[1:]
			q.size -= next.size
			q.mu.Unlock()
			return next.ev, true, false
		}
		q.mu.Unlock()
		select {
		case <-q.notify:
		case <-ctx.Done():
			return nil, false, false
		case <-stop:
			return nil, false, false
		}
	}
}

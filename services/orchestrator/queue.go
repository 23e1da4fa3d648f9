package orchestrator

import (
	"context"
	"sync"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

// eventQueue hands a run's events to a streaming caller without ever blocking the run: pushes
// append, pops wait.
type eventQueue struct {
	mu     sync.Mutex
	items  []*eventv1.RunEvent
	notify chan struct{}
}

func newEventQueue() *eventQueue { return &eventQueue{notify: make(chan struct{}, 1)} }

func (q *eventQueue) push(ev *eventv1.RunEvent) {
	q.mu.Lock()
	q.items = append(q.items, ev)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// pop returns the next event, waiting for one; false when ctx ends or stop closes first.
func (q *eventQueue) pop(ctx context.Context, stop <-chan struct{}) (*eventv1.RunEvent, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			ev := q.items[0]
			q.items = q.items[1:]
			q.mu.Unlock()
			return ev, true
		}
		q.mu.Unlock()
		select {
		case <-q.notify:
		case <-ctx.Done():
			return nil, false
		case <-stop:
			return nil, false
		}
	}
}

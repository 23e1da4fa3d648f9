package orchestrator

import (
	"sync"

	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
)

// inbox holds what was handed to a run (decisions, answers) until the run's waits take it.
// The store's shared watch puts inputs in without waiting, and no goroutine of the run
// forwards them: an idle in-flight run must cost little (issue 15).
type inbox struct {
	mu    sync.Mutex
	queue []runstore.Input
	ready chan struct{} // holds a signal while queue is not empty
}

func newInbox() *inbox { return &inbox{ready: make(chan struct{}, 1)} }

// put queues in and signals ready.
func (b *inbox) put(in runstore.Input) {
	b.mu.Lock()
	b.queue = append(b.queue, in)
	b.mu.Unlock()
	b.signal()
}

// next takes the oldest input; false when none waits. ready is signalled again while inputs
// remain, so a wait that stops taking them leaves them for the next.
func (b *inbox) next() (runstore.Input, bool) {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.mu.Unlock()
		return runstore.Input{}, false
	}
	in := b.queue[0]
	b.queue[0] = runstore.Input{}
	b.queue = b.queue[1:]
	more := len(b.queue) > 0
	b.mu.Unlock()
	if more {
		b.signal()
	}
	return in, true
}

func (b *inbox) signal() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

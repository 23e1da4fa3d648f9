package runstore

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// inputHub shares one watch of the inputs bucket among every run a replica executes, instead
// of a watch (a JetStream consumer, with its goroutines and buffers in the client and the
// server) per run: an idle in-flight run must cost little (issue 15). The watch starts with
// the first run that watches its inputs and ends watchLinger after the last one stopped, or
// when the store closes. It keeps the inputs recorded for each run (the bucket holds only
// those of unfinished runs: a run's inputs are purged when it ends), so a run that starts
// watching gets those recorded before it first, then the new ones, each once. When the watch
// fails (NATS restarted), it starts again and skips what it delivered already.
type inputHub struct {
	bucket func() jetstream.KeyValue

	mu       sync.Mutex
	subs     map[string]*subscription      // run id → its subscription
	recorded map[string]map[string]*record // run id → key → the input recorded under it
	stop     context.CancelFunc            // ends the watch; nil when none runs
	stopped  chan struct{}                 // closed when the watch's goroutine has ended
	idle     *time.Timer                   // ends the watch once no run has watched for linger
	linger   time.Duration                 // watchLinger; shorter in tests
	closed   bool                          // the store closed: no watch starts again
}

// watchLinger is how long the watch outlives the last run that watched. A replica that runs
// one run at a time would otherwise make and delete a JetStream consumer for every run, two
// requests to the JetStream API and the server's work for each (issue 15).
const watchLinger = time.Minute

// record is an input recorded under a key, at a revision.
type record struct {
	rev uint64
	in  Input
}

// subscription is a run's subscription to its inputs (WatchInputs): no goroutine of its own,
// since an idle in-flight run must cost little (issue 15); the hub's watch hands each input to
// deliver.
type subscription struct {
	runID   string
	deliver func(Input)
	closed  bool // ended: nothing more is delivered
	sent    map[string]uint64
}

func newInputHub(bucket func() jetstream.KeyValue) *inputHub {
	return &inputHub{bucket: bucket, subs: map[string]*subscription{}, recorded: map[string]map[string]*record{}, linger: watchLinger}
}

// subscribe registers runID's subscription until ctx ends, delivering the inputs recorded for
// it so far at once, and starts the watch when none runs.
func (h *inputHub) subscribe(ctx context.Context, runID string, deliver func(Input)) {
	sub := &subscription{runID: runID, deliver: deliver}
	h.mu.Lock()
	if old := h.subs[runID]; old != nil {
		old.end() // the run watches again (it moved back to this replica): one subscription
	}
	h.subs[runID] = sub
	// In the order they were recorded, as the watch delivers them: a run takes no input
	// recorded after its cancellation (ErrCancelled).
	recorded := h.recorded[runID]
	keys := slices.SortedFunc(maps.Keys(recorded), func(a, b string) int {
		return cmp.Compare(recorded[a].rev, recorded[b].rev)
	})
	for _, key := range keys {
		sub.push(key, recorded[key])
	}
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	if h.stop == nil && !h.closed {
		wctx, stop := context.WithCancel(context.Background())
		h.stop, h.stopped = stop, make(chan struct{})
		go h.watch(wctx, h.stopped)
	}
	h.mu.Unlock()
	context.AfterFunc(ctx, func() { h.unsubscribe(sub) })
}

// unsubscribe ends sub, and has the watch end a linger later when no run watches any more.
func (h *inputHub) unsubscribe(sub *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sub.end()
	if h.subs[sub.runID] == sub {
		delete(h.subs, sub.runID)
	}
	if len(h.subs) == 0 && h.stop != nil && h.idle == nil {
		h.idle = time.AfterFunc(h.linger, h.stopIdle)
	}
}

// stopIdle ends the watch unless a run watches again.
func (h *inputHub) stopIdle() {
	h.mu.Lock()
	if len(h.subs) > 0 {
		h.mu.Unlock()
		return
	}
	h.idle = nil
	stopped := h.stopWatch()
	h.mu.Unlock()
	if stopped != nil {
		<-stopped
	}
}

// close ends the watch for good and returns once its goroutine has ended.
func (h *inputHub) close() {
	h.mu.Lock()
	h.closed = true
	if h.idle != nil {
		h.idle.Stop()
		h.idle = nil
	}
	stopped := h.stopWatch()
	h.mu.Unlock()
	if stopped != nil {
		<-stopped
	}
}

// stopWatch ends the watch and returns the channel closed once its goroutine has ended (nil
// when none runs). The hub's lock is held.
func (h *inputHub) stopWatch() chan struct{} {
	if h.stop == nil {
		return nil
	}
	h.stop()
	stopped := h.stopped
	h.stop, h.stopped = nil, nil
	h.recorded = map[string]map[string]*record{} // the next watch replays the bucket
	return stopped
}

// watch follows the bucket until ctx ends, starting again after a failure.
func (h *inputHub) watch(ctx context.Context, stopped chan<- struct{}) {
	defer close(stopped)
	for ctx.Err() == nil {
		h.follow(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // NATS is away: try again shortly
		}
	}
}

// follow watches the bucket once, until ctx ends or the watch fails.
func (h *inputHub) follow(ctx context.Context) {
	w, err := h.bucket().WatchAll(ctx)
	if err != nil {
		return
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				h.take(e)
			}
		}
	}
}

// keys returns the keys of the inputs recorded for runID.
func (h *inputHub) keys(runID string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Collect(maps.Keys(h.recorded[runID]))
}

// take records an update of the bucket and hands a new input to its run's subscription.
func (h *inputHub) take(e jetstream.KeyValueEntry) {
	runID, _, ok := strings.Cut(e.Key(), ".")
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut {
		delete(h.recorded[runID], e.Key()) // purged: the run ended
		if len(h.recorded[runID]) == 0 {
			delete(h.recorded, runID)
		}
		return
	}
	in, err := decodeInput(e.Key(), e.Value())
	if err != nil {
		return // not an input of this build: ignored rather than fatal
	}
	rec := &record{rev: e.Revision(), in: in}
	if h.recorded[runID] == nil {
		h.recorded[runID] = map[string]*record{}
	}
	h.recorded[runID][e.Key()] = rec
	if sub := h.subs[runID]; sub != nil {
		sub.push(e.Key(), rec)
	}
}

// push delivers rec unless it was delivered already. The hub's lock is held.
func (sub *subscription) push(key string, rec *record) {
	if sub.closed || sub.sent[key] >= rec.rev {
		return
	}
	if sub.sent == nil { // made on the first input: most runs get none
		sub.sent = map[string]uint64{}
	}
	sub.sent[key] = rec.rev
	sub.deliver(rec.in)
}

// end closes the subscription. The hub's lock is held.
func (sub *subscription) end() { sub.closed = true }

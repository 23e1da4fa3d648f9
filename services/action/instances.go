package action

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// InstanceBucket is the JetStream key-value bucket where every live action stage instance
// keeps a heartbeat key: a started call whose instance has no key there died with it.
const InstanceBucket = "AGENTMESH_ACTION_INSTANCES"

// instanceTTL is how long an instance counts as alive after its last heartbeat; heartbeats
// come every third of it.
const instanceTTL = 6 * time.Second

// heartbeat keeps one instance's key alive in InstanceBucket, from its first use until close.
// Writing a started record waits for the first beat, so no reader ever sees a running call of
// an instance it does not know.
type heartbeat struct {
	l        *KVLedger
	instance string

	mu      sync.Mutex
	running bool // the background beats run
	closed  bool
	stop    chan struct{}
	stopped chan struct{}
}

func newHeartbeat(l *KVLedger) *heartbeat {
	return &heartbeat{l: l, instance: nuid.Next(), stop: make(chan struct{}), stopped: make(chan struct{})}
}

// start writes the first beat, then beats in the background until close; it returns the
// instance's name, or the first beat's error (the next call tries again).
func (h *heartbeat) start(ctx context.Context) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		return h.instance, nil
	}
	if h.closed {
		return "", errors.New("call ledger: closed")
	}
	if err := h.beat(ctx); err != nil {
		return "", err
	}
	h.running = true
	go h.run()
	return h.instance, nil
}

func (h *heartbeat) run() {
	defer close(h.stopped)
	tick := time.NewTicker(instanceTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
			if err := h.beat(context.Background()); err != nil {
				h.l.log.Warn("action instance heartbeat failed", "instance", h.instance, "err", err)
			}
		}
	}
}

func (h *heartbeat) beat(ctx context.Context) error {
	return h.l.doInstances(ctx, func(ctx context.Context, kv jetstream.KeyValue) error {
		_, err := kv.Put(ctx, h.instance, nil)
		return err
	})
}

// close stops the beats and removes the instance's key: its calls are over.
func (h *heartbeat) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	close(h.stop)
	if !h.running {
		return
	}
	<-h.stopped
	_ = h.l.doInstances(context.Background(), func(ctx context.Context, kv jetstream.KeyValue) error {
		return kv.Delete(ctx, h.instance)
	})
}

// alive reports whether instance has a heartbeat key.
func (l *KVLedger) alive(ctx context.Context, instance string) (bool, error) {
	var found bool
	err := l.doInstances(ctx, func(ctx context.Context, kv jetstream.KeyValue) error {
		_, err := kv.Get(ctx, instance)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("call ledger: is instance %s alive: %w", instance, err)
	}
	return found, nil
}

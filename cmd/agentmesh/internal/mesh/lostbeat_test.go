package mesh_test

import (
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestABeatWhoseAnswerWasLostKeepsTheHeartbeat: a heartbeat's beat that NATS stored, but
// whose answer was lost with the connection (it dropped, and the replica reconnected), must be
// given up in time for the next beat to store the heartbeat before its TTL passes. Before, the
// beat waited out the store's 5 s bound of an attempt, longer than the TTL: the heartbeat
// lapsed, and the other replicas took the live replica for dead and adopted its runs. The
// heartbeats' times are NATS's own, read by a watcher of the replicas' bucket.
func TestABeatWhoseAnswerWasLostKeepsTheHeartbeat(t *testing.T) {
	const ttl = 3 * time.Second
	srv, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	cutter := natstest.NewCutter(t, srv.ClientURL()[len("nats://"):])
	cfg := config.Default()
	cfg.NATS.URL = cutter.URL()
	cfg.Durability.LeaseTTLMS = ttl.Milliseconds()
	startReplicas(t, cfg, 1, nil)

	beats := watchHeartbeats(t, srv.ClientURL())
	var times []time.Time
	next := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-beats:
			times = append(times, at)
			return at
		case <-time.After(time.Minute):
			t.Fatalf("no %s within a minute", what)
			return time.Time{}
		}
	}
	next("first heartbeat")
	cutter.Arm("$KV." + runstore.ReplicaBucket + ".")
	select {
	case <-cutter.Cut():
	case <-time.After(time.Minute):
		t.Fatal("no beat was cut within a minute")
	}
	cut := time.Now()
	// The beat that was cut, then two after it: the first of them is the one that had to come
	// before the TTL passed.
	for !next("beat after the cut").After(cut) {
	}
	next("second beat after the cut")
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap >= ttl {
			t.Fatalf("the heartbeat went %v without a beat, past its TTL of %v (beats at %v)",
				gap, ttl, times)
		}
	}
}

// watchHeartbeats returns the times NATS stored each beat of the replicas' heartbeats, as it
// stores them, read through a connection of its own to the NATS server at url.
func watchHeartbeats(t *testing.T, url string) <-chan time.Time {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), runstore.ReplicaBucket) // the mesh made it at its start
	if err != nil {
		t.Fatalf("the replicas' bucket: %v", err)
	}
	ctx := t.Context()
	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop() })
	beats := make(chan time.Time, 64)
	go func() {
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			select {
			case beats <- e.Created():
			case <-ctx.Done():
				return
			}
		}
	}()
	return beats
}

package action_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// testLedger checks the Ledger contract on an empty ledger.
func testLedger(t *testing.T, l action.Ledger) {
	ctx := t.Context()
	started := &actionv1.CallRecord{RunId: "run/1", CallId: "call.1", ToolName: "counter", State: actionv1.CallState_CALL_STATE_STARTED}
	done := &actionv1.CallRecord{RunId: "run/1", CallId: "call.1", ToolName: "counter", State: actionv1.CallState_CALL_STATE_DONE,
		Response: &actionv1.ExecuteResponse{Result: "counted"}}

	if _, _, err := l.Get(ctx, "run/1", "call.1"); !errors.Is(err, action.ErrNoRecord) {
		t.Fatalf("Get of a new call: %v, want action.ErrNoRecord", err)
	}
	rev, err := l.Put(ctx, started, 0)
	if err != nil || rev == 0 {
		t.Fatalf("Put of a new call: revision %d, %v", rev, err)
	}
	if _, err := l.Put(ctx, started, 0); !errors.Is(err, action.ErrRecordChanged) {
		t.Fatalf("second Put of a new call: %v, want action.ErrRecordChanged", err)
	}
	if _, _, err := l.Get(ctx, "run/1", "call.2"); !errors.Is(err, action.ErrNoRecord) {
		t.Fatalf("Get of another call: %v, want action.ErrNoRecord", err)
	}

	// A waiter on the started revision returns with the done record's write.
	waited := make(chan error, 1)
	go func() { waited <- l.Wait(ctx, "run/1", "call.1", rev) }()
	next, err := l.Put(ctx, done, rev)
	if err != nil || next == rev {
		t.Fatalf("Put at the current revision: revision %d, %v", next, err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := l.Put(ctx, started, rev); !errors.Is(err, action.ErrRecordChanged) {
		t.Fatalf("Put at a stale revision: %v, want action.ErrRecordChanged", err)
	}
	got, gotRev, err := l.Get(ctx, "run/1", "call.1")
	if err != nil || gotRev != next || got.GetState() != actionv1.CallState_CALL_STATE_DONE || got.GetResponse().GetResult() != "counted" {
		t.Fatalf("Get = %v at %d, %v; want the done record at %d", got, gotRev, err, next)
	}

	if err := l.Wait(ctx, "run/1", "call.1", rev); err != nil {
		t.Fatalf("Wait on a past revision: %v, want an immediate return", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := l.Wait(short, "run/1", "call.1", next); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on the current revision: %v, want the context's deadline", err)
	}
}

func TestMemoryLedger(t *testing.T) {
	testLedger(t, action.NewMemoryLedger(10))

	t.Run("evicts done records only", func(t *testing.T) {
		ctx := t.Context()
		l := action.NewMemoryLedger(2)
		put := func(call string, state actionv1.CallState) {
			t.Helper()
			if _, err := l.Put(ctx, &actionv1.CallRecord{RunId: "r", CallId: call, State: state}, 0); err != nil {
				t.Fatal(err)
			}
		}
		put("running", actionv1.CallState_CALL_STATE_STARTED)
		put("a", actionv1.CallState_CALL_STATE_DONE)
		put("b", actionv1.CallState_CALL_STATE_DONE) // evicts a, the oldest done record
		for call, want := range map[string]bool{"running": true, "a": false, "b": true} {
			if _, _, err := l.Get(ctx, "r", call); (err == nil) != want {
				t.Errorf("%s kept = %v, want %v", call, err == nil, want)
			}
		}
	})

	// A tool's result may be up to 8 MiB: 10,000 of them were 80 GiB, kept by the stage
	// without NATS until it ran out of memory. The done records are bounded by their size too.
	t.Run("evicts done records past its bytes", func(t *testing.T) {
		ctx := t.Context()
		l := action.NewMemoryLedgerOfBytes(100, 100<<10)
		result := strings.Repeat("r", 40<<10)
		put := func(call string, state actionv1.CallState) {
			t.Helper()
			rec := &actionv1.CallRecord{RunId: "r", CallId: call, State: state}
			if state == actionv1.CallState_CALL_STATE_DONE {
				rec.Response = &actionv1.ExecuteResponse{Result: result}
			}
			if _, err := l.Put(ctx, rec, 0); err != nil {
				t.Fatal(err)
			}
		}
		put("running", actionv1.CallState_CALL_STATE_STARTED)
		for _, call := range []string{"a", "b", "c", "d"} {
			put(call, actionv1.CallState_CALL_STATE_DONE)
		}
		for call, want := range map[string]bool{"running": true, "a": false, "b": false, "c": true, "d": true} {
			if _, _, err := l.Get(ctx, "r", call); (err == nil) != want {
				t.Errorf("%s kept = %v, want %v", call, err == nil, want)
			}
		}
	})
}

// natsServer starts an embedded NATS server with JetStream, stopped when the test ends.
func natsServer(t *testing.T) *events.Embedded {
	t.Helper()
	srv, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// connect opens a connection to srv that reconnects forever, as the stage's, closed when the
// test ends.
func connect(t *testing.T, srv *events.Embedded) *nats.Conn {
	t.Helper()
	nc, err := events.Connect(srv.ClientURL(), "agentmesh-action-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// kvLedger returns a ledger on its own connection to srv, as one replica of the stage has.
func kvLedger(t *testing.T, srv *events.Embedded, opts action.KVLedgerOptions) *action.KVLedger {
	t.Helper()
	l, _ := kvLedgerConn(t, srv, opts)
	return l
}

// kvLedgerConn is kvLedger that also returns the ledger's connection.
func kvLedgerConn(t *testing.T, srv *events.Embedded, opts action.KVLedgerOptions) (*action.KVLedger, *nats.Conn) {
	t.Helper()
	nc := connect(t, srv)
	l, err := action.NewKVLedger(nc, opts)
	if err != nil {
		t.Fatalf("NewKVLedger: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, nc
}

func TestKVLedger(t *testing.T) {
	srv := natsServer(t)
	js, err := jetstream.New(connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.NATS.Storage = config.StorageMemory
	cfg.Durability.CallRecordTTLMS = 3_600_000
	l := kvLedger(t, srv, action.KVLedgerOptionsFromConfig(cfg))
	testLedger(t, l)

	t.Run("the bucket is made from the configuration", func(t *testing.T) {
		kv, err := js.KeyValue(t.Context(), action.CallBucket)
		if err != nil {
			t.Fatalf("bucket %s: %v", action.CallBucket, err)
		}
		status, err := kv.Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if c := status.Config(); c.TTL != time.Hour || c.Storage != jetstream.MemoryStorage || c.Replicas != 1 {
			t.Errorf("bucket ttl %s, storage %s, replicas %d; want 1h, memory, 1", c.TTL, c.Storage, c.Replicas)
		}
	})

	t.Run("keys encode any ids, one key a call", func(t *testing.T) {
		ctx := t.Context()
		calls := [][2]string{{"a.b", "c"}, {"a", "b.c"}, {"run 7/ü*>", "call_1"}, {"-", "="}}
		for i, c := range calls {
			rec := &actionv1.CallRecord{RunId: c[0], CallId: c[1], ToolName: "counter", State: actionv1.CallState_CALL_STATE_DONE,
				Response: &actionv1.ExecuteResponse{Result: fmt.Sprint(i)}}
			if _, err := l.Put(ctx, rec, 0); err != nil {
				t.Fatalf("Put %q: %v", c, err)
			}
		}
		for i, c := range calls {
			rec, _, err := l.Get(ctx, c[0], c[1])
			if err != nil || rec.GetResponse().GetResult() != fmt.Sprint(i) {
				t.Errorf("Get %q = %v, %v; want result %d", c, rec, err, i)
			}
		}
		kv, err := js.KeyValue(ctx, action.CallBucket)
		if err != nil {
			t.Fatal(err)
		}
		// The key is "<run_id>.<call_id>", each in unpadded base64url.
		if _, err := kv.Get(ctx, "cnVuIDcvw7wqPg.Y2FsbF8x"); err != nil {
			t.Errorf("the record of (%q, %q) is not under its key: %v", calls[2][0], calls[2][1], err)
		}
	})

	t.Run("a bucket that is gone is made again", func(t *testing.T) {
		ctx := t.Context()
		if err := js.DeleteKeyValue(ctx, action.CallBucket); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.Get(ctx, "r", "c"); !errors.Is(err, action.ErrNoRecord) {
			t.Fatalf("Get after the bucket was deleted: %v, want ErrNoRecord", err)
		}
		rec := &actionv1.CallRecord{RunId: "r", CallId: "c", State: actionv1.CallState_CALL_STATE_STARTED}
		if _, err := l.Put(ctx, rec, 0); err != nil {
			t.Fatalf("Put after the bucket was deleted: %v", err)
		}
		if err := js.DeleteKeyValue(ctx, action.CallBucket); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Put(ctx, rec, 0); err != nil {
			t.Fatalf("Put after the bucket was deleted again: %v", err)
		}
	})

	t.Run("a record over the max payload is kept whole in the body store", func(t *testing.T) {
		ctx := t.Context()
		large := &actionv1.CallRecord{RunId: "big", CallId: "c", ToolName: "dump", State: actionv1.CallState_CALL_STATE_DONE,
			Response: &actionv1.ExecuteResponse{Result: strings.Repeat("x", 3<<20)}}
		for range 2 { // the second time, after the body store is gone
			rev, err := l.Put(ctx, large, 0)
			if err != nil {
				t.Fatalf("Put of a 3 MiB record: %v", err)
			}
			if _, err := l.Put(ctx, large, 0); !errors.Is(err, action.ErrRecordChanged) {
				t.Fatalf("second Put of the record: %v, want action.ErrRecordChanged", err)
			}
			got, gotRev, err := l.Get(ctx, "big", "c")
			if err != nil || gotRev != rev || got.GetResponse().GetResult() != large.GetResponse().GetResult() {
				t.Fatalf("Get = %d bytes at %d, %v; want the whole record at %d", len(got.GetResponse().GetResult()), gotRev, err, rev)
			}
			bodies, err := js.ObjectStore(ctx, action.CallBodyBucket)
			if err != nil {
				t.Fatalf("object store %s: %v", action.CallBodyBucket, err)
			}
			status, err := bodies.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if status.TTL() != time.Hour || status.Storage() != jetstream.MemoryStorage {
				t.Errorf("body store ttl %s, storage %s; want the bucket's 1h, memory", status.TTL(), status.Storage())
			}
			if objects, err := bodies.List(ctx); err != nil || len(objects) != 1 {
				t.Errorf("the body store holds %d objects (%v), want the record's only, not the failed write's", len(objects), err)
			}
			kv, err := js.KeyValue(ctx, action.CallBucket)
			if err != nil {
				t.Fatal(err)
			}
			if err := kv.Delete(ctx, "Ymln.Yw"); err != nil {
				t.Fatal(err)
			}
			if err := js.DeleteObjectStore(ctx, action.CallBodyBucket); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("errors other than the answers mean unavailable", func(t *testing.T) {
		ctx := t.Context()
		closed, nc := kvLedgerConn(t, srv, action.KVLedgerOptions{})
		nc.Close()
		rec := &actionv1.CallRecord{RunId: "r", CallId: "c", State: actionv1.CallState_CALL_STATE_STARTED}
		if _, _, err := closed.Get(ctx, "r", "c"); err == nil || errors.Is(err, action.ErrNoRecord) {
			t.Errorf("Get on a closed connection: %v", err)
		}
		if _, err := closed.Put(ctx, rec, 0); err == nil || errors.Is(err, action.ErrRecordChanged) {
			t.Errorf("Put on a closed connection: %v", err)
		}
		if err := closed.Wait(ctx, "r", "c", 0); err == nil || errors.Is(err, context.Canceled) {
			t.Errorf("Wait on a closed connection: %v", err)
		}
	})
}

// countingLedger counts the reads and writes of the ledger it wraps.
type countingLedger struct {
	action.Ledger
	gets, puts atomic.Int32
}

func (c *countingLedger) Get(ctx context.Context, runID, callID string) (*actionv1.CallRecord, uint64, error) {
	c.gets.Add(1)
	return c.Ledger.Get(ctx, runID, callID)
}

func (c *countingLedger) Put(ctx context.Context, rec *actionv1.CallRecord, revision uint64) (uint64, error) {
	c.puts.Add(1)
	return c.Ledger.Put(ctx, rec, revision)
}

// TestANewCallWritesTheLedgerWithoutReadingIt: a new call costs its two records and no read
// (issue 15), while a call the ledger knows is still answered from its record, even when its
// request would not be admitted now.
func TestANewCallWritesTheLedgerWithoutReadingIt(t *testing.T) {
	counter := newFakeTool("counter", returns("counted"))
	counter.def.InputSchema = args(t, map[string]any{"type": "object", "required": []any{"x"}})
	ledger := &countingLedger{Ledger: action.NewMemoryLedger(16)}
	client := serve(t, action.Options{Tools: []action.Tool{counter}, Ledger: ledger})

	req := request(t, "counter", map[string]any{"x": 1})
	if resp, err := client.Execute(t.Context(), req); err != nil || resp.GetResult() != "counted" || resp.GetCached() {
		t.Fatalf("new call: %v %v", resp, err)
	}
	if gets, puts := ledger.gets.Load(), ledger.puts.Load(); gets != 0 || puts != 2 {
		t.Fatalf("a new call read the ledger %d times and wrote it %d times, want 0 and 2", gets, puts)
	}

	again := proto.CloneOf(req)
	if resp, err := client.Execute(t.Context(), again); err != nil || resp.GetResult() != "counted" || !resp.GetCached() {
		t.Fatalf("the same call again: %v %v, want the cached result", resp, err)
	}
	again.Arguments = args(t, map[string]any{"y": 1}) // no longer matches the tool's schema
	if resp, err := client.Execute(t.Context(), again); err != nil || resp.GetResult() != "counted" || !resp.GetCached() {
		t.Fatalf("the same call id with arguments the schema refuses: %v %v, want the cached result", resp, err)
	}
	if n := counter.calls.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

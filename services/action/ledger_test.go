package action

import (
	"context"
	"errors"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
)

// testLedger checks the Ledger contract on an empty ledger.
func testLedger(t *testing.T, l Ledger) {
	ctx := t.Context()
	started := &actionv1.CallRecord{RunId: "run/1", CallId: "call.1", ToolName: "counter", State: actionv1.CallState_CALL_STATE_STARTED}
	done := &actionv1.CallRecord{RunId: "run/1", CallId: "call.1", ToolName: "counter", State: actionv1.CallState_CALL_STATE_DONE,
		Response: &actionv1.ExecuteResponse{Result: "counted"}}

	if _, _, err := l.Get(ctx, "run/1", "call.1"); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("Get of a new call: %v, want ErrNoRecord", err)
	}
	rev, err := l.Put(ctx, started, 0)
	if err != nil || rev == 0 {
		t.Fatalf("Put of a new call: revision %d, %v", rev, err)
	}
	if _, err := l.Put(ctx, started, 0); !errors.Is(err, ErrRecordChanged) {
		t.Fatalf("second Put of a new call: %v, want ErrRecordChanged", err)
	}
	if _, _, err := l.Get(ctx, "run/1", "call.2"); !errors.Is(err, ErrNoRecord) {
		t.Fatalf("Get of another call: %v, want ErrNoRecord", err)
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
	if _, err := l.Put(ctx, started, rev); !errors.Is(err, ErrRecordChanged) {
		t.Fatalf("Put at a stale revision: %v, want ErrRecordChanged", err)
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
	testLedger(t, newMemoryLedger(10))

	t.Run("evicts done records only", func(t *testing.T) {
		ctx := t.Context()
		l := newMemoryLedger(2)
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
}

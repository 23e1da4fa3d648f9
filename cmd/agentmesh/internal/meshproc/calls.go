package meshproc

import (
	"context"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// ToolCallsBucket is the JetStream key-value bucket where the action stage records every tool
// call as an agentmesh.action.v1.CallRecord, started and then done.
const ToolCallsBucket = "AGENTMESH_TOOL_CALLS"

// WaitCallRecord waits up to timeout until the action stage has recorded the run's call in
// state, and returns the record; it fails t when it does not. It reads the records' values,
// whatever their keys.
func (m *Mesh) WaitCallRecord(t testing.TB, runID, callID string, state actionv1.CallState, timeout time.Duration) *actionv1.CallRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	kv := m.waitBucket(t, ctx, ToolCallsBucket)
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatalf("watch %s: %v", ToolCallsBucket, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case entry := <-w.Updates():
			if entry == nil || entry.Operation() != jetstream.KeyValuePut {
				continue // the end of the initial values, or a deletion
			}
			rec := &actionv1.CallRecord{}
			if err := proto.Unmarshal(entry.Value(), rec); err != nil {
				t.Fatalf("%s key %s is not a CallRecord: %v", ToolCallsBucket, entry.Key(), err)
			}
			if rec.GetRunId() == runID && rec.GetCallId() == callID && rec.GetState() == state {
				return rec
			}
		case <-ctx.Done():
			t.Fatalf("the action stage recorded no call %s of run %s as %s in %s", callID, runID, state, timeout)
		}
	}
}

// waitBucket polls until the key-value bucket exists, failing t when ctx ends first.
func (m *Mesh) waitBucket(t testing.TB, ctx context.Context, bucket string) jetstream.KeyValue {
	t.Helper()
	var kv jetstream.KeyValue
	err := retry(ctx, nil, func() (err error) {
		kv, err = m.js.KeyValue(ctx, bucket)
		return err
	})
	if err != nil {
		t.Fatalf("no bucket %s in time: %v", bucket, err)
	}
	return kv
}

package action

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"github.com/agentmesh/agentmesh/pkg/kvbody"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// Buckets of the call ledger.
const (
	// CallBucket is the JetStream key-value bucket that holds the call records.
	CallBucket = "AGENTMESH_TOOL_CALLS"
	// CallBodyBucket is the object store that holds the records too large for one entry of
	// CallBucket.
	CallBodyBucket = "AGENTMESH_TOOL_CALL_BODIES"
)

// DefaultLedgerTimeout bounds each read and write of a KVLedger when KVLedgerOptions.Timeout
// is 0.
const DefaultLedgerTimeout = 5 * time.Second

// KVLedgerOptions configures a KVLedger.
type KVLedgerOptions struct {
	// Replicas is the buckets' replication factor; 0 means 1.
	Replicas int
	// Storage is where JetStream keeps the buckets: jetstream.FileStorage (the zero value)
	// or jetstream.MemoryStorage.
	Storage jetstream.StorageType
	// TTL is how long a record is kept after its last write; 0 keeps records for good.
	TTL time.Duration
	// Timeout bounds each read and write; a ledger that does not answer within it counts as
	// unavailable. 0 means DefaultLedgerTimeout.
	Timeout time.Duration
}

// KVLedger is a Ledger in the JetStream key-value bucket CallBucket, which every replica of
// the stage shares. The bucket is created on first use, and again when it is found gone (a
// NATS server restarted with an empty store). A call's record is kept, as the binary
// actionv1.CallRecord, under the key "<run_id>.<call_id>" with both ids in unpadded base64url:
// any ids make a valid key, and different calls different keys. Revisions are the bucket's.
// A record too large for one entry (a response over the NATS max payload, 1 MB by default)
// is kept whole in the object store CallBodyBucket, as checkpoints are (pkg/kvbody), and
// its entry holds the record without the response and the object's name (body_object).
type KVLedger struct {
	nc        *nats.Conn
	calls     *lazyBucket[jetstream.KeyValue]
	bodies    *lazyBucket[jetstream.ObjectStore] // CallBodyBucket
	instances *lazyBucket[jetstream.KeyValue]    // InstanceBucket
	timeout   time.Duration
	log       *slog.Logger
	beat      *heartbeat
	health    connHealth // whether nc is up
}

// NewKVLedger returns a ledger on the NATS connection nc; it does not touch the server until
// it is used.
func NewKVLedger(nc *nats.Conn, opts KVLedgerOptions) (*KVLedger, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("call ledger: %w", err)
	}
	l := &KVLedger{
		nc: nc,
		calls: keyValue(js, jetstream.KeyValueConfig{
			Bucket:      CallBucket,
			Description: "agentmesh action stage: one record per tool call, started then done",
			TTL:         opts.TTL,
			Storage:     opts.Storage,
			Replicas:    opts.Replicas,
		}),
		bodies: objectStore(js, jetstream.ObjectStoreConfig{
			Bucket:      CallBodyBucket,
			Description: "agentmesh action stage: call records too large for one entry",
			TTL:         opts.TTL,
			Storage:     opts.Storage,
			Replicas:    opts.Replicas,
		}),
		instances: keyValue(js, jetstream.KeyValueConfig{
			Bucket:      InstanceBucket,
			Description: "agentmesh action stage: a heartbeat key per live instance",
			TTL:         instanceTTL,
			Storage:     opts.Storage,
			Replicas:    opts.Replicas,
		}),
		timeout: opts.Timeout,
		log:     slog.Default(),
	}
	if l.timeout <= 0 {
		l.timeout = DefaultLedgerTimeout
	}
	l.health.nc = nc
	l.beat = newHeartbeat(l)
	return l, nil
}

// Serving reports whether the ledger can be reached, which is while its NATS connection is up,
// and returns a channel that is closed when that may have changed (Service.Serving).
func (l *KVLedger) Serving() (bool, <-chan struct{}) { return l.health.serving() }

// Instance names this process in started records; the first call makes it known as alive,
// and it stays so until Close.
func (l *KVLedger) Instance(ctx context.Context) (string, error) { return l.beat.start(ctx) }

// Alive reports whether an instance still has its heartbeat key.
func (l *KVLedger) Alive(ctx context.Context, instance string) (bool, error) {
	return l.alive(ctx, instance)
}

// Close stops this process's heartbeat and removes its key, so the calls it started and did
// not finish are known dead at once. Close it after the calls have drained.
func (l *KVLedger) Close() error {
	l.beat.close()
	return nil
}

// Get returns the call's record and its revision, or ErrNoRecord.
func (l *KVLedger) Get(ctx context.Context, runID, callID string) (*actionv1.CallRecord, uint64, error) {
	key := recordKey(runID, callID)
	var entry jetstream.KeyValueEntry
	err := l.do(ctx, func(ctx context.Context, kv jetstream.KeyValue) (err error) {
		entry, err = kv.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNoRecord
	}
	if err != nil {
		return nil, 0, fmt.Errorf("call ledger: reading %s: %w", key, err)
	}
	rec := &actionv1.CallRecord{}
	if err := proto.Unmarshal(entry.Value(), rec); err != nil {
		return nil, 0, fmt.Errorf("call ledger: the record %s does not parse: %w", key, err)
	}
	if name := rec.GetBodyObject(); name != "" {
		if rec, err = l.body(ctx, name); err != nil {
			return nil, 0, fmt.Errorf("call ledger: the record %s: %w", key, err)
		}
	}
	return rec, entry.Revision(), nil
}

// body reads the whole record kept in the object name.
func (l *KVLedger) body(ctx context.Context, name string) (*actionv1.CallRecord, error) {
	var data []byte
	err := l.bodies.do(ctx, l.timeout, func(ctx context.Context, bodies jetstream.ObjectStore) (err error) {
		data, err = bodies.GetBytes(ctx, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading its body %s: %w", name, err)
	}
	rec := &actionv1.CallRecord{}
	if err := proto.Unmarshal(data, rec); err != nil {
		return nil, fmt.Errorf("its body %s does not parse: %w", name, err)
	}
	rec.BodyObject = name
	return rec, nil
}

// Put stores rec if the call's record is at revision: it creates the key for revision 0 and
// updates it at that revision otherwise.
func (l *KVLedger) Put(ctx context.Context, rec *actionv1.CallRecord, revision uint64) (uint64, error) {
	key := recordKey(rec.GetRunId(), rec.GetCallId())
	value, body, err := l.encode(ctx, key, rec)
	if err != nil {
		return 0, err
	}
	next, err := l.put(ctx, key, value, revision)
	if err != nil && body != "" {
		l.dropBody(ctx, body)
	}
	return next, err
}

// encode returns the entry of rec: rec itself, or, when it is too large for one entry, a
// reference to the object (body) where it is now kept whole.
func (l *KVLedger) encode(ctx context.Context, key string, rec *actionv1.CallRecord) (value []byte, body string, err error) {
	if rec.GetBodyObject() != "" {
		rec = proto.CloneOf(rec)
		rec.BodyObject = ""
	}
	value, err = proto.Marshal(rec)
	if err != nil {
		return nil, "", fmt.Errorf("call ledger: encoding the record %s: %w", key, err)
	}
	if kvbody.Fits(l.nc, len(value)) {
		return value, "", nil
	}
	err = l.bodies.do(ctx, l.timeout, func(ctx context.Context, bodies jetstream.ObjectStore) (err error) {
		body, err = kvbody.Put(ctx, l.nc, bodies, key, value)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("call ledger: storing the body of the record %s: %w", key, err)
	}
	ref := proto.CloneOf(rec)
	ref.Response, ref.BodyObject = nil, body
	if value, err = proto.Marshal(ref); err != nil {
		l.dropBody(ctx, body)
		return nil, "", fmt.Errorf("call ledger: encoding the record %s: %w", key, err)
	}
	return value, body, nil
}

// dropBody deletes a body no entry names (a write that failed); one left behind only costs
// space until it expires.
func (l *KVLedger) dropBody(ctx context.Context, name string) {
	_ = l.bodies.do(ctx, l.timeout, func(ctx context.Context, bodies jetstream.ObjectStore) error {
		return bodies.Delete(ctx, name)
	})
}

// put writes value under key if the key is at revision (0: if it has no entry).
func (l *KVLedger) put(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	var next uint64
	err := l.do(ctx, func(ctx context.Context, kv jetstream.KeyValue) (err error) {
		if revision == 0 {
			next, err = kv.Create(ctx, key, value)
		} else {
			next, err = kv.Update(ctx, key, value, revision)
		}
		return err
	})
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, ErrRecordChanged
	}
	if err != nil {
		return 0, fmt.Errorf("call ledger: writing %s: %w", key, err)
	}
	return next, nil
}

// Wait watches the call's key until its record leaves revision: it is written, deleted, or
// found gone.
func (l *KVLedger) Wait(ctx context.Context, runID, callID string, revision uint64) error {
	key := recordKey(runID, callID)
	var w jetstream.KeyWatcher
	err := l.do(ctx, func(_ context.Context, kv jetstream.KeyValue) (err error) {
		w, err = kv.Watch(ctx, key) // a watch lasts as long as the context it was made with
		return err
	})
	if err != nil {
		return fmt.Errorf("call ledger: watching %s: %w", key, err)
	}
	defer func() { _ = w.Stop() }()
	// The watch delivers the key's latest entry, if any, then nil, then every later write.
	seen := false
	for {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return fmt.Errorf("call ledger: the watch of %s ended", key)
			case e != nil:
				seen = true
				if e.Revision() != revision {
					return nil
				}
			case !seen && revision != 0: // the record expired
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// do runs op on the call bucket within the ledger's timeout.
func (l *KVLedger) do(ctx context.Context, op func(context.Context, jetstream.KeyValue) error) error {
	return l.calls.do(ctx, l.timeout, op)
}

// doInstances runs op on the instance bucket within the ledger's timeout.
func (l *KVLedger) doInstances(ctx context.Context, op func(context.Context, jetstream.KeyValue) error) error {
	return l.instances.do(ctx, l.timeout, op)
}

// recordKey is the bucket key of a call: both ids in unpadded base64url, whose alphabet keys
// allow and which has no '.', joined by '.'.
func recordKey(runID, callID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(runID)) + "." + base64.RawURLEncoding.EncodeToString([]byte(callID))
}

package action

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// CallBucket is the JetStream key-value bucket that holds the call records.
const CallBucket = "AGENTMESH_TOOL_CALLS"

// DefaultLedgerTimeout bounds each read and write of a KVLedger when KVLedgerOptions.Timeout
// is 0.
const DefaultLedgerTimeout = 5 * time.Second

// KVLedgerOptions configures a KVLedger.
type KVLedgerOptions struct {
	// Replicas is the bucket's replication factor; 0 means 1.
	Replicas int
	// Storage is where JetStream keeps the bucket: jetstream.FileStorage (the zero value)
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
type KVLedger struct {
	calls     *lazyBucket
	instances *lazyBucket // InstanceBucket
	timeout   time.Duration
	log       *slog.Logger
	beat      *heartbeat
}

// lazyBucket is a key-value bucket created on first use, and again when found gone.
type lazyBucket struct {
	js     jetstream.JetStream
	config jetstream.KeyValueConfig

	mu sync.Mutex
	kv jetstream.KeyValue // nil until the bucket is known to exist
}

// NewKVLedger returns a ledger on the NATS connection nc; it does not touch the server until
// it is used.
func NewKVLedger(nc *nats.Conn, opts KVLedgerOptions) (*KVLedger, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("call ledger: %w", err)
	}
	l := &KVLedger{
		calls: &lazyBucket{js: js, config: jetstream.KeyValueConfig{
			Bucket:      CallBucket,
			Description: "agentmesh action stage: one record per tool call, started then done",
			TTL:         opts.TTL,
			Storage:     opts.Storage,
			Replicas:    opts.Replicas,
		}},
		instances: &lazyBucket{js: js, config: jetstream.KeyValueConfig{
			Bucket:      InstanceBucket,
			Description: "agentmesh action stage: a heartbeat key per live instance",
			TTL:         instanceTTL,
			Storage:     opts.Storage,
			Replicas:    opts.Replicas,
		}},
		timeout: opts.Timeout,
		log:     slog.Default(),
	}
	if l.timeout <= 0 {
		l.timeout = DefaultLedgerTimeout
	}
	l.beat = newHeartbeat(l)
	return l, nil
}

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
	return rec, entry.Revision(), nil
}

// Put stores rec if the call's record is at revision: it creates the key for revision 0 and
// updates it at that revision otherwise.
func (l *KVLedger) Put(ctx context.Context, rec *actionv1.CallRecord, revision uint64) (uint64, error) {
	key := recordKey(rec.GetRunId(), rec.GetCallId())
	value, err := proto.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("call ledger: encoding the record %s: %w", key, err)
	}
	var next uint64
	err = l.do(ctx, func(ctx context.Context, kv jetstream.KeyValue) (err error) {
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

// do runs op on the bucket within timeout, creating the bucket when it is not known to exist,
// and once more when op finds it gone.
func (b *lazyBucket) do(ctx context.Context, timeout time.Duration, op func(context.Context, jetstream.KeyValue) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kv, err := b.bucket(ctx)
	if err != nil {
		return err
	}
	if err = op(ctx, kv); bucketGone(err) {
		b.forget(kv)
		if kv, err = b.bucket(ctx); err == nil {
			err = op(ctx, kv)
		}
	}
	return err
}

// bucket returns the bucket, creating it or updating its settings on first use.
func (b *lazyBucket) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kv != nil {
		return b.kv, nil
	}
	kv, err := b.js.CreateOrUpdateKeyValue(ctx, b.config)
	if err != nil {
		return nil, fmt.Errorf("creating the bucket %s: %w", b.config.Bucket, err)
	}
	b.kv = kv
	return kv, nil
}

// forget drops kv, found gone, so that the next use creates the bucket again.
func (b *lazyBucket) forget(kv jetstream.KeyValue) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kv == kv {
		b.kv = nil
	}
}

// bucketGone reports whether err says that the bucket's stream does not exist: reads find no
// responder, writes no stream, watches no stream.
func bucketGone(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

// recordKey is the bucket key of a call: both ids in unpadded base64url, whose alphabet keys
// allow and which has no '.', joined by '.'.
func recordKey(runID, callID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(runID)) + "." + base64.RawURLEncoding.EncodeToString([]byte(callID))
}

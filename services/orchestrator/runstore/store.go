package runstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket names.
const (
	CheckpointBucket  = "AGENTMESH_CHECKPOINTS"
	BodyBucket        = "AGENTMESH_CHECKPOINT_BODIES"
	ReplicaBucket     = "AGENTMESH_REPLICAS"
	ActiveBucket      = "AGENTMESH_RUN_OWNERS"
	IdempotencyBucket = "AGENTMESH_IDEMPOTENCY"
	InputBucket       = "AGENTMESH_RUN_INPUTS"
	FinishedBucket    = "AGENTMESH_FINISHED_RUNS"
)

// Errors of the store.
var (
	// ErrNotFound is a run (or key) the store does not hold.
	ErrNotFound = errors.New("not found")
	// ErrExists is a key created twice: a run id in use, a decided call.
	ErrExists = errors.New("already exists")
	// ErrConflict is a write whose expected revision is no longer the latest: another
	// replica advanced the run or claimed it.
	ErrConflict = errors.New("revision conflict")
	// ErrUnencodable is a checkpoint protobuf cannot encode: it holds text that is not UTF-8.
	// Storing it again cannot help.
	ErrUnencodable = errors.New("checkpoint cannot be encoded")
	// ErrUnreadable is a run's stored checkpoint that cannot be read back: its entry, its body
	// or a segment of its log does not decode, or its log does not hold what it counts.
	// Reading it again cannot help. (A checkpoint of a newer version than this build reads is
	// not unreadable: a replica of a newer release reads it.)
	ErrUnreadable = errors.New("checkpoint cannot be read")
)

// Config sets the buckets' replication, storage and lifetimes.
type Config struct {
	// Replicas of every bucket (1 for a single NATS server).
	Replicas int
	// Storage of every bucket.
	Storage jetstream.StorageType
	// LeaseTTL is how long a replica's heartbeat lives without another beat.
	LeaseTTL time.Duration
	// IdempotencyTTL is how long an idempotency key names its run.
	IdempotencyTTL time.Duration
	// ClaimTimeout is how long an idempotency key may name a run that stored nothing before
	// it is freed (ClaimTimeout); 0 is a minute.
	ClaimTimeout time.Duration
	// FinishedTTL is how long a retired run's tombstone keeps its id taken (Finish); 0 keeps
	// it for good.
	FinishedTTL time.Duration
}

// Store is the durable state of runs. It is safe for concurrent use.
type Store struct {
	js  jetstream.JetStream
	nc  *nats.Conn
	cfg Config

	mu  sync.Mutex
	b   buckets
	hub *inputHub // the runs' shared watch of their inputs

	beat []byte // what this process's heartbeats hold: its own, unlike any other's (Beat)

	awaitRecheck time.Duration // how often Await reads the checkpoint again (awaitRecheck)
}

// buckets are the handles of the store's buckets.
type buckets struct {
	checkpoints jetstream.KeyValue
	finished    jetstream.KeyValue
	checkLog    jetstream.Stream // the checkpoints bucket's stream, to purge a retired run's key
	bodies      jetstream.ObjectStore
	log         jetstream.Stream
	replicas    jetstream.KeyValue
	active      jetstream.KeyValue
	idempotency jetstream.KeyValue
	inputs      jetstream.KeyValue
	inputLog    jetstream.Stream // the inputs bucket's stream, to purge a run's inputs at once
	activeLog   jetstream.Stream // the active bucket's stream, to list and purge its keys
	replicaLog  jetstream.Stream // the replicas' bucket's stream, to list its keys
}

// Open returns a Store on nc, creating its buckets when they do not exist.
func Open(ctx context.Context, nc *nats.Conn, cfg Config) (*Store, error) {
	if cfg.Replicas < 1 {
		cfg.Replicas = 1
	}
	if cfg.LeaseTTL <= 0 {
		return nil, errors.New("runstore: heartbeat TTL (lease TTL) must be positive")
	}
	if cfg.IdempotencyTTL <= 0 {
		return nil, errors.New("runstore: idempotency TTL must be positive")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("runstore: %w", err)
	}
	s := &Store{js: js, nc: nc, cfg: cfg, beat: []byte(uuid.NewString())}
	s.awaitRecheck = awaitRecheck
	s.hub = newInputHub(func() jetstream.KeyValue { return s.buckets().inputs })
	if err := s.ensure(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Close ends the watch the store's runs share of their inputs (WatchInputs), which outlives
// the last run that watched by a minute, and returns once its goroutines have ended. After
// Close, WatchInputs delivers only the inputs recorded before. The NATS connection stays open.
func (s *Store) Close() { s.hub.close() }

// ClaimTimeout returns how long an idempotency key may name a run that stored nothing before
// a request with the key frees it (Config.ClaimTimeout).
func (s *Store) ClaimTimeout() time.Duration { return cmp.Or(s.cfg.ClaimTimeout, time.Minute) }

// LeaseTTL returns how long a replica's heartbeat lives without another beat.
func (s *Store) LeaseTTL() time.Duration { return s.cfg.LeaseTTL }

// ensure creates (or updates) every bucket.
func (s *Store) ensure(ctx context.Context) error {
	kv := func(name, desc string, ttl time.Duration) (jetstream.KeyValue, error) {
		b, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: desc, History: 1, TTL: ttl, Storage: s.cfg.Storage, Replicas: s.cfg.Replicas,
		})
		if err != nil {
			return nil, fmt.Errorf("runstore: bucket %s: %w", name, err)
		}
		return b, nil
	}
	// streamOf is the stream a key-value bucket keeps its keys in, to purge or list them at once.
	streamOf := func(bucket string) (jetstream.Stream, error) {
		st, err := s.js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return nil, fmt.Errorf("runstore: bucket %s: %w", bucket, err)
		}
		return st, nil
	}
	checkpoints, err := kv(CheckpointBucket, "agentmesh run checkpoints", 0)
	if err != nil {
		return err
	}
	finished, err := kv(FinishedBucket, "agentmesh retired runs' tombstones, keeping their ids taken", s.cfg.FinishedTTL)
	if err != nil {
		return err
	}
	checkLog, err := streamOf(CheckpointBucket)
	if err != nil {
		return err
	}
	replicas, err := kv(ReplicaBucket, "agentmesh orchestrator replicas' heartbeats", s.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	active, err := kv(ActiveBucket, "agentmesh runs not yet finished, by owner", 0)
	if err != nil {
		return err
	}
	idempotency, err := kv(IdempotencyBucket, "agentmesh idempotency keys", s.cfg.IdempotencyTTL)
	if err != nil {
		return err
	}
	inputs, err := kv(InputBucket, "agentmesh approval decisions and cancellations", 0)
	if err != nil {
		return err
	}
	inputLog, err := streamOf(InputBucket)
	if err != nil {
		return err
	}
	activeLog, err := streamOf(ActiveBucket)
	if err != nil {
		return err
	}
	replicaLog, err := streamOf(ReplicaBucket)
	if err != nil {
		return err
	}
	bodies, err := s.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: BodyBucket, Description: "agentmesh checkpoints too large for one entry",
		Storage: s.cfg.Storage, Replicas: s.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("runstore: object store %s: %w", BodyBucket, err)
	}
	log, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: LogStream, Description: "agentmesh run checkpoint logs", Subjects: []string{logSubjects},
		Storage: s.cfg.Storage, Replicas: s.cfg.Replicas, AllowDirect: true,
	})
	if err != nil {
		return fmt.Errorf("runstore: stream %s: %w", LogStream, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = buckets{checkpoints: checkpoints, finished: finished, checkLog: checkLog, bodies: bodies, log: log, replicas: replicas, active: active, idempotency: idempotency, inputs: inputs, inputLog: inputLog, activeLog: activeLog, replicaLog: replicaLog}
	return nil
}

// kvSubject is the subject a key-value bucket stores key on in its stream (key may be a
// wildcard).
func kvSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// buckets returns the current bucket handles (replaced when the buckets are created again).
func (s *Store) buckets() buckets {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b
}

// opTimeout bounds one attempt of a store operation: a request lost while NATS reconnects
// fails after it instead of waiting for the caller's whole deadline.
const opTimeout = 5 * time.Second

// retry runs op, each attempt bounded by opTimeout, once more after creating the buckets
// again when op failed because JetStream no longer has them (NATS restarted with an empty
// store).
func (s *Store) retry(ctx context.Context, op func(ctx context.Context) error) error {
	attempt := func() error {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		return op(ctx)
	}
	err := attempt()
	if !missingBucket(err) {
		return err
	}
	ectx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := s.ensure(ectx); err != nil {
		return err
	}
	return attempt()
}

// missingBucket reports whether err says the bucket's stream does not exist.
func missingBucket(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// has reports whether the key-value bucket that bucket picks holds key.
func (s *Store) has(ctx context.Context, bucket func(buckets) jetstream.KeyValue, key string) (bool, error) {
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := bucket(s.buckets()).Get(ctx, key)
		return err
	})
	if isNotFound(err) {
		return false, nil
	}
	return err == nil, mapErr(err)
}

// isNotFound reports whether err says a key or object does not exist.
func isNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) || errors.Is(err, jetstream.ErrObjectNotFound)
}

// mapErr turns the key-value errors callers branch on into the store's.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnreadable):
		return err // a checkpoint naming an object that is gone is not a run the store lacks
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted), errors.Is(err, jetstream.ErrObjectNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %w", ErrExists, err)
	}
	return err
}

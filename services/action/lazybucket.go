package action

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// lazyBucket is a JetStream bucket (a key-value bucket or an object store) created on first
// use, and again when found gone.
type lazyBucket[B comparable] struct {
	name   string
	create func(ctx context.Context) (B, error) // creates the bucket or updates its settings

	mu sync.Mutex
	b  B // the zero value until the bucket is known to exist
}

// keyValue is the lazy key-value bucket config.
func keyValue(js jetstream.JetStream, config jetstream.KeyValueConfig) *lazyBucket[jetstream.KeyValue] {
	return &lazyBucket[jetstream.KeyValue]{name: config.Bucket, create: func(ctx context.Context) (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, config)
	}}
}

// objectStore is the lazy object store config.
func objectStore(js jetstream.JetStream, config jetstream.ObjectStoreConfig) *lazyBucket[jetstream.ObjectStore] {
	return &lazyBucket[jetstream.ObjectStore]{name: config.Bucket, create: func(ctx context.Context) (jetstream.ObjectStore, error) {
		return js.CreateOrUpdateObjectStore(ctx, config)
	}}
}

// do runs op on the bucket within timeout, creating the bucket when it is not known to exist,
// and once more when op finds it gone.
func (l *lazyBucket[B]) do(ctx context.Context, timeout time.Duration, op func(context.Context, B) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := l.bucket(ctx)
	if err != nil {
		return err
	}
	if err = op(ctx, b); bucketGone(err) {
		l.forget(b)
		if b, err = l.bucket(ctx); err == nil {
			err = op(ctx, b)
		}
	}
	return err
}

// bucket returns the bucket, creating it or updating its settings on first use.
func (l *lazyBucket[B]) bucket(ctx context.Context) (B, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var zero B
	if l.b != zero {
		return l.b, nil
	}
	b, err := l.create(ctx)
	if err != nil {
		return zero, fmt.Errorf("creating the bucket %s: %w", l.name, err)
	}
	l.b = b
	return b, nil
}

// forget drops b, found gone, so that the next use creates the bucket again.
func (l *lazyBucket[B]) forget(b B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b == b {
		var zero B
		l.b = zero
	}
}

// bucketGone reports whether err says that the bucket's stream does not exist: reads find no
// responder, writes no stream, watches no stream.
func bucketGone(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

package runstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Claim binds an idempotency key of a user to runID for the store's IdempotencyTTL. When the
// key is already bound it returns the run it names and ErrExists.
func (s *Store) Claim(ctx context.Context, userID, key, runID string) (string, error) {
	k := idempotencyKey(userID, key)
	var existing string
	err := s.retry(ctx, func(ctx context.Context) error {
		idempotency := s.buckets().idempotency
		_, err := idempotency.Create(ctx, k, []byte(runID))
		if err == nil || !errors.Is(mapErr(err), ErrExists) {
			return err
		}
		e, getErr := idempotency.Get(ctx, k)
		if getErr != nil {
			return getErr
		}
		existing = string(e.Value())
		return err
	})
	return existing, mapErr(err)
}

// Claimed returns the run an idempotency key of a user names and when it was bound to it (by
// Claim); ErrNotFound when it names none.
func (s *Store) Claimed(ctx context.Context, userID, key string) (string, time.Time, error) {
	var (
		runID string
		at    time.Time
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		e, err := s.buckets().idempotency.Get(ctx, idempotencyKey(userID, key))
		if err != nil {
			return err
		}
		runID, at = string(e.Value()), e.Created()
		return nil
	})
	return runID, at, mapErr(err)
}

// idempotencyKey is the bucket key of a user's idempotency key: a hash, since keys are free
// text and bucket keys are not.
func idempotencyKey(userID, key string) string {
	sum := sha256.Sum256([]byte(userID + "\x00" + key))
	return hex.EncodeToString(sum[:])
}

// Unclaim removes an idempotency key of a user while it still names runID (a run that could
// not start).
func (s *Store) Unclaim(ctx context.Context, userID, key, runID string) error {
	k := idempotencyKey(userID, key)
	return mapErr(s.retry(ctx, func(ctx context.Context) error {
		idempotency := s.buckets().idempotency
		e, err := idempotency.Get(ctx, k)
		if err != nil || string(e.Value()) != runID {
			return nil
		}
		return idempotency.Delete(ctx, k, jetstream.LastRevision(e.Revision()))
	}))
}

package runstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A KeyClaim is what an idempotency key of a user names: the run it started, and the
// fingerprint of the request that started it, so that the key reused for another request is
// told apart from a retry.
type KeyClaim struct {
	// RunID is the run the key names.
	RunID string
	// Request is the fingerprint of the request that claimed the key; empty in claims stored
	// by releases before fingerprints, which name their run for any request.
	Request string
	// At is when the key was claimed (set by Claimed, not read by Claim).
	At time.Time
}

// encode is the claim as the bucket holds it: the run id, then the fingerprint after a space
// (a run id has no spaces: runid.Check). A value without a space is an earlier
// release's, the run id alone.
func (c KeyClaim) encode() []byte {
	if c.Request == "" {
		return []byte(c.RunID)
	}
	return []byte(c.RunID + " " + c.Request)
}

// decodeClaim reads a claim from its bucket entry.
func decodeClaim(e jetstream.KeyValueEntry) KeyClaim {
	runID, request, _ := strings.Cut(string(e.Value()), " ")
	return KeyClaim{RunID: runID, Request: request, At: e.Created()}
}

// Claim binds an idempotency key of a user to c for the store's IdempotencyTTL. When the key
// is already bound it returns the claim it holds and ErrExists.
func (s *Store) Claim(ctx context.Context, userID, key string, c KeyClaim) (KeyClaim, error) {
	k := idempotencyKey(userID, key)
	var existing KeyClaim
	err := s.retry(ctx, func(ctx context.Context) error {
		idempotency := s.buckets().idempotency
		_, err := idempotency.Create(ctx, k, c.encode())
		if err == nil || !errors.Is(mapErr(err), ErrExists) {
			return err
		}
		e, getErr := idempotency.Get(ctx, k)
		if getErr != nil {
			return getErr
		}
		existing = decodeClaim(e)
		return err
	})
	return existing, mapErr(err)
}

// Claimed returns the claim an idempotency key of a user holds; ErrNotFound when it names no
// run.
func (s *Store) Claimed(ctx context.Context, userID, key string) (KeyClaim, error) {
	var c KeyClaim
	err := s.retry(ctx, func(ctx context.Context) error {
		e, err := s.buckets().idempotency.Get(ctx, idempotencyKey(userID, key))
		if err != nil {
			return err
		}
		c = decodeClaim(e)
		return nil
	})
	return c, mapErr(err)
}

// idempotencyKey is the bucket key of a user's idempotency key: a hash, since keys are free
// text and bucket keys are not.
func idempotencyKey(userID, key string) string {
	sum := sha256.Sum256([]byte(userID + "\x00" + key))
	return hex.EncodeToString(sum[:])
}

// Unclaim removes an idempotency key of a user while it still names runID (a run that could
// not start). A key that names no run, or another run, is left as it is, and nil returned; a
// key that could not be read is an error: it may still name runID.
func (s *Store) Unclaim(ctx context.Context, userID, key, runID string) error {
	k := idempotencyKey(userID, key)
	return mapErr(s.retry(ctx, func(ctx context.Context) error {
		idempotency := s.buckets().idempotency
		e, err := idempotency.Get(ctx, k)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if decodeClaim(e).RunID != runID {
			return nil
		}
		err = idempotency.Delete(ctx, k, jetstream.LastRevision(e.Revision()))
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return nil // freed, or claimed anew, since it was read: it no longer names runID
		}
		return err
	}))
}

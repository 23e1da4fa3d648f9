package runstore

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// Acquire takes the lease of a run for replica and returns its revision; ErrExists while
// another replica (or this one) holds it. The lease lives for the store's LeaseTTL unless it
// is renewed.
func (s *Store) Acquire(ctx context.Context, runID, replica string) (uint64, error) {
	var rev uint64
	err := s.retry(ctx, func(ctx context.Context) error {
		leases := s.buckets().leases
		var err error
		rev, err = leases.Create(ctx, runID, []byte(replica))
		return err
	})
	return rev, mapErr(err)
}

// Renew extends a lease held at revision rev and returns the new revision; ErrConflict when
// the lease was lost (it expired and another replica took it). A lease that merely expired,
// with nobody else holding it, is taken again.
func (s *Store) Renew(ctx context.Context, runID, replica string, rev uint64) (uint64, error) {
	var next uint64
	err := s.retry(ctx, func(ctx context.Context) error {
		leases := s.buckets().leases
		var err error
		next, err = leases.Update(ctx, runID, []byte(replica), rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			if e, getErr := leases.Get(ctx, runID); isNotFound(getErr) {
				next, err = leases.Create(ctx, runID, []byte(replica))
			} else if getErr == nil && string(e.Value()) == replica {
				next, err = leases.Update(ctx, runID, []byte(replica), e.Revision())
			}
		}
		return err
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrConflict
	}
	return next, mapErr(err)
}

// Release gives up a lease held at revision rev, so another replica can take the run at once.
func (s *Store) Release(ctx context.Context, runID string, rev uint64) error {
	err := s.retry(ctx, func(ctx context.Context) error {
		leases := s.buckets().leases
		return leases.Delete(ctx, runID, jetstream.LastRevision(rev))
	})
	if err == nil || isNotFound(err) {
		return nil
	}
	return mapErr(err)
}

// Holder returns the replica holding a run's lease and the lease's revision; ErrNotFound when
// none does.
func (s *Store) Holder(ctx context.Context, runID string) (string, uint64, error) {
	var (
		holder string
		rev    uint64
	)
	err := s.retry(ctx, func(ctx context.Context) error {
		leases := s.buckets().leases
		e, err := leases.Get(ctx, runID)
		if err != nil {
			return err
		}
		holder, rev = string(e.Value()), e.Revision()
		return nil
	})
	return holder, rev, mapErr(err)
}

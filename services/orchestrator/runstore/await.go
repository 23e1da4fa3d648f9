package runstore

import (
	"context"
	"errors"
	"time"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/nats-io/nats.go/jetstream"
)

// Await returns a run's checkpoint, whole, once done accepts it, watching the checkpoint
// change (whichever replica writes it) until ctx ends; ErrNotFound when a read finds no
// checkpoint (nor tombstone): at once for a run the store does not hold, and when the
// checkpoint it waits on is purged. It used to wait for a run without a checkpoint to store
// one, and a CancelRun of a run discarded after its first read waited out its caller's
// deadline. Discard purges the checkpoint through the bucket, then drops the marker from the
// bucket's stream: a watch whose consumer had not delivered the marker by then never does,
// and the wait went on for good; so the checkpoint is read again every awaitRecheck, whatever
// the watch delivered. done is given the
// checkpoint without what its log holds (request, contract, available, conversation,
// transcript and accounting are empty), so a wait reads the log once, not at every change.
func (s *Store) Await(ctx context.Context, runID string, done func(*checkpointv1.RunCheckpoint) bool) (*checkpointv1.RunCheckpoint, error) {
	return s.await(ctx, runID, done, false)
}

// AwaitStored waits until a run has a checkpoint (or a tombstone), watching for it until ctx
// ends: a run whose idempotency key is claimed, whose replica has not yet stored it.
func (s *Store) AwaitStored(ctx context.Context, runID string) error {
	_, err := s.await(ctx, runID, func(*checkpointv1.RunCheckpoint) bool { return true }, true)
	return err
}

// await is Await; with absent, a run without a checkpoint is waited for rather than
// ErrNotFound.
func (s *Store) await(ctx context.Context, runID string, done func(*checkpointv1.RunCheckpoint) bool, absent bool) (*checkpointv1.RunCheckpoint, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var w jetstream.KeyWatcher
	watchCtx := ctx // the watch lives as long as the wait, not one attempt
	err := s.retry(ctx, func(context.Context) error {
		var err error
		w, err = s.buckets().checkpoints.Watch(watchCtx, runID)
		return err
	})
	if err != nil {
		return nil, mapErr(err)
	}
	defer func() { _ = w.Stop() }()
	recheck := time.NewTicker(s.awaitRecheck)
	defer recheck.Stop()
	for {
		cp, h, err := s.load(ctx, runID, done)
		if err != nil && (!absent || !errors.Is(err, ErrNotFound)) {
			return nil, err
		}
		if h != nil {
			return cp, nil
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case _, ok := <-w.Updates():
			if !ok && ctx.Err() != nil { // the watch ends with ctx: its end is ctx's
				return nil, context.Cause(ctx)
			}
			if !ok {
				return nil, errors.New("runstore: the checkpoint watch ended")
			}
		case <-recheck.C:
		}
	}
}

// awaitRecheck is how often an Await reads the checkpoint it waits on again, whatever its
// watch delivered: it sees a checkpoint that Discard purged within this time, though its watch
// missed the purge (see Await). A read of the checkpoint's entry alone, a few a minute.
const awaitRecheck = 2 * time.Second

package runstore

import (
	"context"
	"fmt"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// Finish retires a finished run whose result the memory stage keeps: tomb, the run's tombstone
// (FINISHED, ResultSaved, no result), goes to FinishedBucket, where it lives Config.FinishedTTL;
// then the run's checkpoint (and the object holding it, if any) is removed, and Retire removes
// the rest. Until the tombstone expires, Load and State return it as the run's checkpoint, and
// Taken reports the id taken. The tombstone goes first, so that a run created with the same id
// once the checkpoint is gone finds it. h is the head the run's owner last saved at, or nil.
//
// A tombstone used to replace the checkpoint, in a bucket without a TTL: every run ever made
// kept a key there for good. The checkpoint is purged rather than deleted, which would leave a
// marker for good.
func (s *Store) Finish(ctx context.Context, tomb *checkpointv1.RunCheckpoint, h *Head) error {
	runID := tomb.GetRunId()
	data, err := proto.Marshal(tomb)
	if err != nil {
		return fmt.Errorf("runstore: %w of run %s: %w", ErrUnencodable, runID, err)
	}
	err = s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		if _, err := b.finished.Put(ctx, runID, data); err != nil {
			return err
		}
		return b.checkLog.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(CheckpointBucket, runID)))
	})
	if err != nil {
		return mapErr(err)
	}
	if h != nil && h.body != "" {
		_ = s.buckets().bodies.Delete(ctx, h.body) // a body left behind only costs space
	}
	return s.Retire(ctx, runID, h)
}

// Taken reports whether a retired run's tombstone keeps runID taken (Finish).
func (s *Store) Taken(ctx context.Context, runID string) (bool, error) {
	return s.has(ctx, func(b buckets) jetstream.KeyValue { return b.finished }, runID)
}

// Discard removes what Create stored of a run that will not go on (its id turned out taken):
// its checkpoint log (the first checkpoint's segment, when its request, contract and tools
// outgrew the entry, and the objects it names), the object holding its checkpoint if any, its
// checkpoint, the inputs handed to it (a cancellation of the run by its id, between its Create
// and its Discard), and its entry among the active runs. The log's stream and the inputs'
// bucket have no limits: what Discard left there would stay for good. The checkpoint is purged through the bucket first,
// so that an Await of the run sees it go and ends ErrNotFound, then from the bucket's stream,
// which drops the purge marker too.
func (s *Store) Discard(ctx context.Context, runID string) error {
	return mapErr(s.retry(ctx, func(ctx context.Context) error {
		b := s.buckets()
		if err := purgeLog(ctx, b, runID); err != nil {
			return err
		}
		if err := deleteBody(ctx, b, runID); err != nil {
			return err
		}
		if err := b.checkpoints.Purge(ctx, runID); err != nil {
			return err
		}
		if err := b.checkLog.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(CheckpointBucket, runID))); err != nil {
			return err
		}
		if err := s.purgeInputs(ctx, b, runID); err != nil {
			return err
		}
		return b.activeLog.Purge(ctx, jetstream.WithPurgeSubject(kvSubject(ActiveBucket, runID)))
	}))
}

// deleteBody deletes the object that holds a run's checkpoint, when its entry names one
// (encode): a checkpoint too large for an entry.
func deleteBody(ctx context.Context, b buckets, runID string) error {
	e, err := b.checkpoints.Get(ctx, runID)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	stub := &checkpointv1.RunCheckpoint{}
	if proto.Unmarshal(e.Value(), stub) != nil || stub.GetBodyObject() == "" {
		return nil // not a checkpoint of this build's format: nothing it names is known
	}
	if err := b.bodies.Delete(ctx, stub.GetBodyObject()); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// tombstone reads the tombstone of a retired run (Finish) as its checkpoint, for load: its head
// stands at no revision, since nothing is saved after a tombstone.
func (s *Store) tombstone(ctx context.Context, b buckets, runID string, want func(*checkpointv1.RunCheckpoint) bool) (*checkpointv1.RunCheckpoint, *Head, error) {
	e, err := b.finished.Get(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	cp := &checkpointv1.RunCheckpoint{}
	if err := proto.Unmarshal(e.Value(), cp); err != nil {
		return nil, nil, fmt.Errorf("runstore: tombstone of run %s is corrupt: %w: %w",
			runID, ErrUnreadable, err)
	}
	if want != nil && !want(cp) {
		return cp, nil, nil
	}
	return cp, &Head{}, nil
}

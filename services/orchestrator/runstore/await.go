package runstore

import (
	"context"
	"errors"

	checkpointv1 "github.com/agentmesh/agentmesh/gen/agentmesh/checkpoint/v1"
	"github.com/nats-io/nats.go/jetstream"
)

// Await returns a run's checkpoint, whole, once done accepts it, watching the checkpoint
// change (whichever replica writes it) until ctx ends; ErrNotFound when the run has no
// checkpoint. done is given the checkpoint without what its log holds (request, contract,
// available, conversation, transcript and accounting are empty), so a wait reads the log
// once, not at every change.
func (s *Store) Await(ctx context.Context, runID string, done func(*checkpointv1.RunCheckpoint) bool) (*checkpointv1.RunCheckpoint, error) {
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
	for {
		cp, h, err := s.load(ctx, runID, done)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if h != nil {
			return cp, nil
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case _, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("runstore: the checkpoint watch ended")
			}
		}
	}
}

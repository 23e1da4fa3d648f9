package runstore

import (
	"context"
	"errors"
	"fmt"
)

// ErrCancelled is an input (a decision or an answer) recorded after its run's cancellation:
// the run's owner takes the cancellation first and ends the run without the input. A caller
// that read the run not being cancelled, then recorded its input, may have lost to a
// CancelRun between the two; the inputs bucket orders them (its revisions), and the run takes
// only what precedes its cancellation.
var ErrCancelled = errors.New("the run was cancelled before the input")

// cancelKey is the key of a run's cancellation.
func cancelKey(runID string) string { return runID + ".cancel" }

// cancelledBefore is ErrCancelled when the run's cancellation is recorded at a revision
// before rev, an input's; nil when it is not, or after rev.
func (s *Store) cancelledBefore(ctx context.Context, runID string, rev uint64) error {
	var cancelRev uint64
	err := s.retry(ctx, func(ctx context.Context) error {
		e, err := s.buckets().inputs.Get(ctx, cancelKey(runID))
		if err == nil {
			cancelRev = e.Revision()
		}
		return err
	})
	switch {
	case isNotFound(err):
		return nil
	case err != nil:
		return mapErr(err)
	case cancelRev < rev:
		return fmt.Errorf("%w: run %s", ErrCancelled, runID)
	}
	return nil
}

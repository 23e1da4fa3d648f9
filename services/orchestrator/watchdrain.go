package orchestrator

import (
	"context"
	"errors"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// errWatchDrained is the cause of the end of a watch's context when its replica drains.
var errWatchDrained = errors.New("the orchestrator replica is shutting down")

// untilDrain is ctx, ended also when the replica begins to drain (errWatchDrained): a watch
// follows a run's events in JetStream, which any replica serves, and would otherwise last until
// its run ends, holding the replica's shutdown for its whole drain timeout before being cut.
// stop releases what it holds.
func (s *Service) untilDrain(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-s.draining:
			cancel(errWatchDrained)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		cancel(nil)
		<-done
	}
}

// errWatchMoved is what a watch of run runID that its draining replica ended gets: UNAVAILABLE,
// so that its client (the CLI does) watches on through another replica after seq, the last
// event it was sent.
func errWatchMoved(runID string, seq uint64) error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE,
		"this orchestrator replica is shutting down: watch run %q on another replica from seq %d", runID, seq)
}

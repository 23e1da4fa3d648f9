package orchestrator

import (
	"context"
	"fmt"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// maxStarting is how many runs a replica starts at once. Starting a durable run is a few
// writes to JetStream (the idempotency key, the first checkpoint, the run's owner), each waiting
// for its ack within the store's attempt timeout; a burst of thousands of runs would have
// them all in flight together, queued in NATS behind each other and the running runs'
// events, and the last ones would time out and be refused UNAVAILABLE though nothing failed.
// Past this many, a run waits its turn to start instead, for as long as its caller waits.
const maxStarting = 128

// errDraining refuses a run on a replica that is shutting down.
func errDraining() error {
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE,
		"this orchestrator replica is shutting down; send the run to another replica")
}

// admit waits until the run may start (fewer than maxStarting are starting) and returns
// what gives its place back; it gives up when ctx ends or the replica drains.
func (s *Service) admit(ctx context.Context) (release func(), err error) {
	select {
	case s.starts <- struct{}{}:
		return func() { <-s.starts }, nil
	default:
	}
	select {
	case s.starts <- struct{}{}:
		return func() { <-s.starts }, nil
	case <-s.draining:
		return nil, errDraining()
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for one of the %d runs starting on this replica: %w", maxStarting, context.Cause(ctx))
	}
}

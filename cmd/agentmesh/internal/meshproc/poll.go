package meshproc

import (
	"context"
	"errors"
	"time"
)

// pollInterval is the pause between two tries of a condition the harness waits for.
const pollInterval = 20 * time.Millisecond

// errExited says that the process a wait was for exited meanwhile.
var errExited = errors.New("the process exited")

// retry calls try every pollInterval until it returns nil, and returns nil. When ctx ends first
// it returns the last error try returned before ctx ended (not the one ctx's end caused), and
// when exited (nil for none) is closed first, errExited.
func retry(ctx context.Context, exited <-chan struct{}, try func() error) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for {
		err := try()
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-tick.C:
		case <-exited:
			return errExited
		case <-ctx.Done():
			return last
		}
	}
}

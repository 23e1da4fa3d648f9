package ask

import (
	"context"
	"errors"
	"time"
)

// TimedOut reports whether ctx's deadline has passed, by ctx's error or by the clock: the
// generation stage's failure at that deadline (gRPC's, which the stage keeps too) may arrive
// before ctx's timer has fired, on a busy machine, and a model that ran out of time would be
// reported as one that failed otherwise. A context without a deadline has not timed out.
func TimedOut(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	due, ok := ctx.Deadline()
	return ok && !time.Now().Before(due)
}

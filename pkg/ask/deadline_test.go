package ask_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/ask"
)

// lateTimer is a context whose deadline has passed but whose timer has not fired yet, as a
// generation failure at the deadline may find it.
type lateTimer struct{ context.Context }

func (lateTimer) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// TestTimedOut: a deadline has passed by the context's error or by the clock; a context
// without a deadline, or cancelled before it, has not timed out.
func TestTimedOut(t *testing.T) {
	expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, cancel2 := context.WithCancel(t.Context())
	cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"no deadline", t.Context(), false},
		{"cancelled", cancelled, false},
		{"deadline exceeded", expired, true},
		{"deadline passed, timer not fired", lateTimer{t.Context()}, true},
	} {
		if got := ask.TimedOut(c.ctx); got != c.want {
			t.Errorf("%s: TimedOut = %v, want %v", c.name, got, c.want)
		}
	}
}

package orchestrator

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// TestDetachedDerivesWithoutGoroutines: a context derived from a detached one has the detached
// one's values, is cancelled with its lifetime, and starts no goroutine to watch it.
func TestDetachedDerivesWithoutGoroutines(t *testing.T) {
	type key struct{}
	until, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	values, stop := context.WithCancel(context.WithValue(t.Context(), key{}, "span"))
	stop() // ended: the detached context still lives
	d := detached{Context: context.WithoutCancel(values), until: until}

	const derived = 100
	before := runtime.NumGoroutine()
	ctxs := make([]context.Context, derived)
	for i := range ctxs {
		ctx, cancel := context.WithTimeout(d, time.Hour)
		defer cancel()
		ctxs[i] = ctx
	}
	if started := runtime.NumGoroutine() - before; started >= derived/2 {
		t.Fatalf("%d contexts derived from a detached one started %d goroutines", derived, started)
	}
	for _, ctx := range ctxs {
		if ctx.Err() != nil || ctx.Value(key{}) != "span" {
			t.Fatalf("derived context: err %v, value %v; want a live context with the detached one's values", ctx.Err(), ctx.Value(key{}))
		}
	}

	drained := errors.New("drain over")
	cancel(drained)
	for _, ctx := range ctxs {
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), drained) {
			t.Fatalf("derived context ended by %v; want the lifetime's cause %v", context.Cause(ctx), drained)
		}
	}
}

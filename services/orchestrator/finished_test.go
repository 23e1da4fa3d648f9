package orchestrator

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// TestWhetherRunFinishedIsStoredHasADefiniteAnswer: a replica that finishes a run found
// finished in its checkpoint publishes run_finished only when the events stream says it holds
// none. A lookup that failed otherwise (NATS away, a request lost) counted as "none", and
// run_finished was published a second time; now it is asked again until the stream answers,
// or its context ends, which is an error.
func TestWhetherRunFinishedIsStoredHasADefiniteAnswer(t *testing.T) {
	nc := natstest.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := events.EnsureStream(ctx, js, events.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, events.Subject("done", "run_finished"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string]bool{"done": true, "going": false} {
		if got, err := runFinishedStored(ctx, js, run); err != nil || got != want {
			t.Errorf("run_finished of run %q stored = %v, %v; want %v", run, got, err, want)
		}
	}
	nc.Close()
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if got, err := runFinishedStored(lctx, js, "done"); err == nil {
		t.Errorf("run_finished stored, asked over a closed connection = %v, nil; want an error", got)
	}
}

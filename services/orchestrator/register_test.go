package orchestrator

import (
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
)

// TestRegisterRefusesOnceDraining: a run becomes live on a replica until the replica drains;
// from then on, a run that finishes starting (or being adopted) is not registered, and is no
// longer counted as starting, so the drain, which hands off the runs live when it begins, has
// none it does not know of.
func TestRegisterRefusesOnceDraining(t *testing.T) {
	s := &Service{live: map[string]*run{}, starting: map[string]bool{}, draining: make(chan struct{}), metrics: newInstruments(noop.NewMeterProvider())}
	before := &run{id: "before"}
	s.starting[before.id] = true
	if !s.register(t.Context(), before) || s.liveRun(before.id) != before || !s.ours(before.id) || s.starting[before.id] {
		t.Fatal("a run registered before the drain is not live")
	}
	close(s.draining)
	late := &run{id: "late"}
	s.starting[late.id] = true
	if s.register(t.Context(), late) {
		t.Fatal("a run registered once the replica drains")
	}
	if s.ours(late.id) || len(s.liveRuns()) != 1 {
		t.Errorf("after a refused registration: ours %v, %d live runs; want not ours, only the first", s.ours(late.id), len(s.liveRuns()))
	}
}

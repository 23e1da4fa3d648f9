package events

import "testing"

func TestReadiness(t *testing.T) {
	var r readiness
	ready, changed := r.get()
	if ready {
		t.Fatal("a new readiness is ready")
	}
	steps := []struct {
		name      string
		do        func()
		wantReady bool
		wantTold  bool // the channel of the step before is closed
	}{
		{"a success while disconnected says nothing", func() { r.setStored(true) }, false, false},
		{"connected, no success yet", func() { r.setConnected(true) }, false, false},
		{"a success", func() { r.setStored(true) }, true, true},
		{"another success", func() { r.setStored(true) }, true, false},
		{"a failure", func() { r.setStored(false) }, false, true},
		{"a success again", func() { r.setStored(true) }, true, true},
		{"disconnected", func() { r.setConnected(false) }, false, true},
		{"reconnected: the old success is forgotten", func() { r.setConnected(true) }, false, false},
	}
	for _, s := range steps {
		s.do()
		var told bool
		select {
		case <-changed:
			told = true
		default:
		}
		ready, next := r.get()
		if ready != s.wantReady || told != s.wantTold {
			t.Fatalf("%s: ready %v, told %v; want ready %v, told %v", s.name, ready, told, s.wantReady, s.wantTold)
		}
		changed = next
	}
}

package orchestrator

import (
	"slices"
	"testing"
	"time"
)

// TestDeltasAreCoalesced: the first delta of an answer goes out at once, those within
// deltaInterval of the last event go out together with the next one after it, and flush
// sends what is left; content and reasoning each join up in order.
func TestDeltasAreCoalesced(t *testing.T) {
	var got []string
	clock := time.Unix(0, 0)
	d := &deltas{
		now:  func() time.Time { return clock },
		emit: func(content, reasoning string) { got = append(got, content+"|"+reasoning) },
	}
	at := func(ms int, content, reasoning string) {
		clock = time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond)
		d.add(content, reasoning)
	}
	at(0, "a", "")
	at(10, "b", "r1")
	at(20, "", "") // nothing to send: neither text nor a reason to emit
	at(40, "c", "r2")
	at(60, "d", "")
	at(70, "e", "")
	d.flush()
	d.flush() // nothing pending: no event
	want := []string{"a|", "bcd|r1r2", "e|"}
	if !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}

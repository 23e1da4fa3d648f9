package config

import (
	"fmt"
	"strconv"
)

// DefaultStreamMaxAgeMS is how long the event stream keeps a run's events when
// nats.stream_max_age_ms is 0: 7 days.
const DefaultStreamMaxAgeMS = 7 * 24 * 3600 * 1000

// EventDuplicateWindowMS is how long the event stream remembers an event's id, to drop the
// event when it is published again (a publish whose ack was lost): 2 minutes. JetStream takes
// no stream that keeps its events for less.
const EventDuplicateWindowMS = 2 * 60 * 1000

// EventsKeptMS returns how long the event stream keeps a run's events, in milliseconds:
// StreamMaxAgeMS, or DefaultStreamMaxAgeMS when it is 0.
func (n NATS) EventsKeptMS() int64 {
	if n.StreamMaxAgeMS == 0 {
		return DefaultStreamMaxAgeMS
	}
	return n.StreamMaxAgeMS
}

// validateEventAge refuses an event stream that keeps events for less time than a run may
// last (total_timeout_ms counts through the run's pauses): the run's first events would expire
// while it runs, and a watch from its start find them gone. The defaults and the run_limits
// ceiling are checked here; the orchestrator refuses a request's overrides beyond it.
func (c *Config) validateEventAge(p *problems) {
	n := c.NATS
	if n.StreamMaxAgeMS < 0 {
		return // validateDurability says so
	}
	if n.StreamMaxAgeMS > 0 && n.StreamMaxAgeMS < EventDuplicateWindowMS {
		p.addf("nats.stream_max_age_ms: must be at least %d (2 minutes, the window in which "+
			"the stream drops an event published again), got %d",
			EventDuplicateWindowMS, n.StreamMaxAgeMS)
	}
	kept := n.EventsKeptMS()
	got := strconv.FormatInt(n.StreamMaxAgeMS, 10)
	if n.StreamMaxAgeMS == 0 {
		got += fmt.Sprintf(" (%d, 7 days)", kept)
	}
	for _, longest := range []struct {
		name string
		ms   int64
	}{{"defaults.total_timeout_ms", c.Defaults.TotalTimeoutMS},
		{"run_limits.total_timeout_ms", c.RunLimits.TotalTimeoutMS}} {
		if longest.ms > kept {
			p.addf("nats.stream_max_age_ms: must be at least %s (%d), the longest a run lasts, "+
				"or its first events expire while it runs; got %s", longest.name, longest.ms, got)
		}
	}
}

package orchestrator

import (
	"context"
	"strings"
	"time"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

// deltaInterval is the least time between two llm_delta events of a streamed answer. A model
// streams a token or a few per chunk, and each event is a write to JetStream that the run
// waits for, so an event per chunk cost a run more than its model's answer did (issue 15);
// at this interval a watcher still sees the answer grow twenty times a second.
const deltaInterval = 50 * time.Millisecond

// deltas coalesces the deltas of a streamed answer into llm_delta events: the first at once,
// then those that come within deltaInterval of the last event together, in the next event
// (when a delta comes after the interval) or when the answer ends (flush). Content and
// reasoning are each concatenated in order, so the events' texts join up to the answer's as
// before; a transport tag the XML stream buffer hands over whole stays whole.
type deltas struct {
	emit      func(content, reasoning string)
	now       func() time.Time
	content   strings.Builder
	reasoning strings.Builder
	last      time.Time // when the last event was emitted; zero before the first
}

// newDeltas coalesces the deltas of attempt, of the run's turn in progress, into its llm_delta
// events; each names its attempt, so that a client tells a retry's answer from the one before.
func newDeltas(ctx context.Context, r *run, attempt int) *deltas {
	return &deltas{now: time.Now, emit: func(content, reasoning string) {
		r.emit(ctx, &eventv1.RunEvent{Kind: &eventv1.RunEvent_LlmDelta{LlmDelta: &eventv1.LlmDelta{
			Turn: r.turns, Attempt: int32(attempt), Content: content, Reasoning: reasoning,
		}}})
	}}
}

// add takes a delta, and emits what is pending when the interval has passed.
func (d *deltas) add(content, reasoning string) {
	if content == "" && reasoning == "" {
		return
	}
	d.content.WriteString(content)
	d.reasoning.WriteString(reasoning)
	if !d.last.IsZero() && d.now().Sub(d.last) < deltaInterval {
		return
	}
	d.flush()
}

// flush emits what is pending, if anything.
func (d *deltas) flush() {
	if d.content.Len() == 0 && d.reasoning.Len() == 0 {
		return
	}
	content, reasoning := d.content.String(), d.reasoning.String()
	d.content.Reset()
	d.reasoning.Reset()
	d.emit(content, reasoning)
	d.last = d.now()
}

package main

import (
	"strings"
	"testing"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

// TestProgressShowsEachAttemptsDeltasApart: the deltas of a retried attempt and those of the
// retry go on lines of their own, the retry's named for its attempt, even with no llm_response
// between them (a watch that starts after it): the progress ran the two answers together.
func TestProgressShowsEachAttemptsDeltasApart(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b}
	delta := func(turn, attempt int32, content string) {
		p.event(&eventv1.RunEvent{Kind: &eventv1.RunEvent_LlmDelta{LlmDelta: &eventv1.LlmDelta{Turn: turn, Attempt: attempt, Content: content}}})
	}
	delta(1, 1, "Paris has ")
	delta(1, 1, "many sights: the")
	delta(1, 2, "The Louvre.")
	delta(2, 1, "Done.")
	p.endLine()
	want := "  model: Paris has many sights: the\n  model (attempt 2): The Louvre.\n  model: Done.\n"
	if got := b.String(); got != want {
		t.Errorf("progress\n%q\nwant\n%q", got, want)
	}
}

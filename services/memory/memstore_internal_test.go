package memory

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// TestMemoryStoreRetention (issue 15.3): the in-memory store keeps at most MaxRuns finished
// runs and none older than MaxAge, forgetting the oldest first with their transcripts and
// learning; saving a run again neither renews it nor counts it twice. A forgotten run is not
// learned from, and the learning queue lets go of the runs it is done with.
func TestMemoryStoreRetention(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s := NewMemoryStoreKeeping(Retention{MaxRuns: 3, MaxAge: time.Hour})
	s.now = func() time.Time { return now }
	save := func(id string) { // a minute after the last
		t.Helper()
		now = now.Add(time.Minute)
		if _, err := s.AppendTranscript(t.Context(), id, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveRun(t.Context(), "alice", &typev1.RunResult{RunId: id}); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(want ...string) {
		t.Helper()
		for i := range 6 {
			id := fmt.Sprintf("run-%d", i)
			_, _, err := s.GetRun(t.Context(), id)
			if wanted := slices.Contains(want, id); wanted != (err == nil) || !wanted && !errors.Is(err, ErrNotFound) {
				t.Errorf("GetRun(%s) = %v, want kept %v", id, err, wanted)
			}
		}
		if len(s.runs) != len(want) || len(s.learning) != len(want) || len(s.saved) != len(want) {
			t.Errorf("%d runs, %d learning states, %d in order; want %d", len(s.runs), len(s.learning), len(s.saved), len(want))
		}
	}
	for i := range 3 {
		save(fmt.Sprintf("run-%d", i))
	}
	save("run-0") // saved again: still the oldest
	kept("run-0", "run-1", "run-2")
	save("run-3")
	kept("run-1", "run-2", "run-3")

	now = now.Add(time.Hour - 3*time.Minute) // run-1 was saved an hour and a minute ago
	save("run-4")
	kept("run-2", "run-3", "run-4")

	for _, want := range []string{"run-2", "run-3", "run-4"} {
		job, ok, err := s.ClaimLearning(t.Context(), now, time.Minute)
		if err != nil || !ok || job.RunID != want {
			t.Fatalf("ClaimLearning = %+v, %v, %v; want %s (the runs forgotten are not queued)", job, ok, err, want)
		}
		if err := s.FinishLearning(t.Context(), want, nil); err != nil {
			t.Fatal(err)
		}
	}
	if job, ok, err := s.ClaimLearning(t.Context(), now, time.Minute); err != nil || ok {
		t.Fatalf("ClaimLearning after the last = %+v, %v, %v; want none", job, ok, err)
	}
	if len(s.queue) != 0 {
		t.Errorf("the learning queue holds %d runs once all are learned from, want none", len(s.queue))
	}
}

// TestARunOlderThanMaxAgeIsForgottenUnread: a run over MaxAge is NOT_FOUND whether or not a
// run was saved since; it was forgotten only at the next save, so on a store that saved
// nothing more it was read back for good.
func TestARunOlderThanMaxAgeIsForgottenUnread(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s := NewMemoryStoreKeeping(Retention{MaxAge: time.Hour})
	s.now = func() time.Time { return now }
	if err := s.SaveRun(t.Context(), "alice", &typev1.RunResult{RunId: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetRun(t.Context(), "r1"); err != nil {
		t.Fatalf("GetRun of a run an hour may keep = %v", err)
	}
	now = now.Add(2 * time.Hour)
	if _, _, err := s.GetRun(t.Context(), "r1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetRun of a run saved two hours ago, MaxAge an hour, nothing saved since = %v; want ErrNotFound", err)
	}
}

package storetest

import (
	"errors"
	"slices"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/memory"
)

// RunRestart checks that everything a store holds survives closing it and opening it again.
// open must return a store over the same database on every call (a new, empty one on the
// first); the suite closes the stores it opens, which must have a Close method.
func RunRestart(t *testing.T, open func(t *testing.T) memory.Store) {
	t.Helper()
	t.Run("Restart", func(t *testing.T) {
		ctx := t.Context()
		const quota = 3
		s := open(t)
		for i, m := range []struct {
			id, text string
			vector   []float32
		}{
			{"m1", "the deploy key rotates every month", []float32{1, 0}},
			{"m2", "the staging database lives on db02", []float32{0, 1}},
			{"m3", "lunch is at noon", nil},
		} {
			if err := s.PutMemory(ctx, newMemory(t, "alice", "", m.id, at(i), m.text), m.vector, quota); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.AppendTranscript(ctx, "run-1", chain(1, "", 2)); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveRun(ctx, "alice", &typev1.RunResult{RunId: "run-1", ExitReason: "COMPLETED"}); err != nil {
			t.Fatal(err)
		}
		claim(t, s, at(1)) // cut off by the restart: claimed, never finished
		closeStore(t, s)

		s = open(t)
		defer closeStore(t, s)
		if got := memoryIDs(list(t, s, "alice", "")); !slices.Equal(got, []string{"m3", "m2", "m1"}) {
			t.Errorf("after restart alice lists %v", got)
		}
		if got := hitIDs(search(t, s, memory.SearchQuery{UserID: "alice", Query: "staging database"})); !slices.Equal(got, []string{"m2"}) {
			t.Errorf("lexical search after restart = %v", got)
		}
		hits := search(t, s, memory.SearchQuery{UserID: "alice", Query: "secret rotation", Vector: []float32{1, 0}})
		if got := hitIDs(hits); !slices.Equal(got, []string{"m1"}) || !near(hits[0].GetRelevanceScore(), 0.8) {
			t.Errorf("semantic search after restart = %v (%v), want m1 scoring 0.8: vectors were not kept", got, hits)
		}
		if err := s.PutMemory(ctx, newMemory(t, "alice", "", "m4", at(4), "one too many"), nil, quota); !errors.Is(err, memory.ErrQuotaExceeded) {
			t.Errorf("put over the quota after restart: %v, want ErrQuotaExceeded", err)
		}
		run, owner, err := s.GetRun(ctx, "run-1")
		if err != nil || run.GetExitReason() != "COMPLETED" || len(run.GetTranscript()) != 2 || owner != "alice" {
			t.Errorf("run after restart = %v of %q, %v", run, owner, err)
		}
		if n, err := s.AppendTranscript(ctx, "run-1", chain(3, "h2", 1)); err != nil || n != 3 {
			t.Errorf("append after restart = %d, %v; want the chain to continue at 3", n, err)
		}
		noClaim(t, s, at(2)) // the claim outlives the restart
		if job := claim(t, s, at(1).Add(lease)); job.RunID != "run-1" || job.UserID != "alice" || job.Attempts != 2 {
			t.Errorf("claim after restart = %+v, want run-1 of alice, attempt 2: the run left the learning queue", job)
		}
	})
}

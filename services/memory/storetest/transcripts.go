package storetest

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/memory"
)

// wantPrecondition asserts that err is VerifyAppend's FAILED_PRECONDITION mentioning part.
func wantPrecondition(t *testing.T, err error, part string) {
	t.Helper()
	if !errors.Is(err, stageerr.ErrFailedPrecondition) {
		t.Fatalf("err = %v, want FAILED_PRECONDITION", err)
	}
	if !strings.Contains(err.Error(), part) {
		t.Errorf("message %q does not mention %q", err.Error(), part)
	}
}

// Appends must continue the stored chain; a refused append stores nothing.
func testTranscript(t *testing.T, s memory.Store) {
	ctx := t.Context()
	if n, err := s.AppendTranscript(ctx, "run-1", chain(1, "", 3)); err != nil || n != 3 {
		t.Fatalf("first append = %d, %v", n, err)
	}
	if n, err := s.AppendTranscript(ctx, "run-1", chain(4, "h3", 2)); err != nil || n != 5 {
		t.Fatalf("second append = %d, %v", n, err)
	}
	broken := chain(6, "h5", 2)
	broken[1].PrevHash = "forged"
	table := []struct {
		name    string
		entries []*typev1.TranscriptEntry
		part    string
	}{
		{"seq gap", chain(7, "h5", 1), "entries[0].seq is 7, want 6"},
		{"seq replay", chain(5, "h4", 1), "entries[0].seq is 5, want 6"},
		{"wrong prev_hash", chain(6, "h4", 1), `entries[0].prev_hash is "h4", want "h5"`},
		{"broken link inside the batch", broken, `entries[1].prev_hash is "forged", want "h6"`},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.AppendTranscript(ctx, "run-1", tc.entries)
			wantPrecondition(t, err, tc.part)
		})
	}
	t.Run("a new run starts at seq 1 with an empty prev_hash", func(t *testing.T) {
		_, err := s.AppendTranscript(ctx, "run-2", chain(1, "h0", 1))
		wantPrecondition(t, err, `want ""`)
		_, err = s.AppendTranscript(ctx, "run-2", chain(2, "h1", 1))
		wantPrecondition(t, err, "seq is 2, want 1")
	})
	t.Run("refused appends stored nothing", func(t *testing.T) {
		if n, err := s.AppendTranscript(ctx, "run-1", chain(6, "h5", 1)); err != nil || n != 6 {
			t.Fatalf("append after refusals = %d, %v", n, err)
		}
		if n, err := s.AppendTranscript(ctx, "run-2", chain(1, "", 1)); err != nil || n != 1 {
			t.Fatalf("run-2 = %d, %v", n, err)
		}
	})
}

// Of concurrent appends of the same next entry, exactly one is stored; the others are told
// the chain moved on.
func testTranscriptConcurrent(t *testing.T, s memory.Store) {
	const writers = 8
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			_, err := s.AppendTranscript(t.Context(), "run-race", chain(1, "", 2))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, stageerr.ErrFailedPrecondition):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || refused.Load() != writers-1 {
		t.Errorf("%d appends stored, %d refused; want 1 and %d", ok.Load(), refused.Load(), writers-1)
	}
	if n, err := s.AppendTranscript(t.Context(), "run-race", chain(3, "h2", 1)); err != nil || n != 3 {
		t.Errorf("next append = %d, %v; want length 3", n, err)
	}
}

// Run results are saved, replaced and read back with the stored transcript.
func testRuns(t *testing.T, s memory.Store) {
	ctx := t.Context()
	result := &typev1.RunResult{
		RunId:       "run-1",
		ExitReason:  "COMPLETED",
		Success:     true,
		Transcript:  chain(1, "", 1),
		FinalReport: &typev1.FinalReport{Status: typev1.ReportStatus_REPORT_STATUS_SUCCESS, Content: "42"},
	}
	if err := s.SaveRun(ctx, "alice", result); err != nil {
		t.Fatal(err)
	}
	result.ExitReason = "changed after save"
	got, owner, err := s.GetRun(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.GetExitReason() != "COMPLETED" || got.GetFinalReport().GetContent() != "42" || !got.GetSuccess() || len(got.GetTranscript()) != 1 {
		t.Errorf("got %v", got)
	}
	if owner != "alice" {
		t.Errorf("the run's user = %q, want alice", owner)
	}
	got.ExitReason = "changed after get"
	if again, _, _ := s.GetRun(ctx, "run-1"); again.GetExitReason() != "COMPLETED" {
		t.Errorf("stored run changed: %v", again)
	}

	t.Run("the stored transcript chain replaces the result's", func(t *testing.T) {
		if _, err := s.AppendTranscript(ctx, "run-1", chain(1, "", 4)); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.GetRun(ctx, "run-1")
		if err != nil {
			t.Fatal(err)
		}
		tr := got.GetTranscript()
		if len(tr) != 4 || tr[3].GetHash() != "h4" || tr[3].GetPrevHash() != "h3" || tr[0].GetSeq() != 1 {
			t.Errorf("transcript = %v", tr)
		}
	})
	t.Run("a later save replaces the earlier one", func(t *testing.T) {
		if err := s.SaveRun(ctx, "alice", &typev1.RunResult{RunId: "run-1", ExitReason: "MAX_TURNS_REACHED"}); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.GetRun(ctx, "run-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.GetExitReason() != "MAX_TURNS_REACHED" || got.GetSuccess() || len(got.GetTranscript()) != 4 {
			t.Errorf("got %v", got)
		}
	})
	t.Run("unknown run", func(t *testing.T) {
		if _, _, err := s.GetRun(ctx, "nope"); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("a transcript alone is not a saved run", func(t *testing.T) {
		if _, err := s.AppendTranscript(ctx, "run-3", chain(1, "", 1)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.GetRun(ctx, "run-3"); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
	})
}

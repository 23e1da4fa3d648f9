package storetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
)

// lease is the claim length of the learning tests.
const lease = time.Minute

// save saves a run of user with the given id.
func save(t *testing.T, s memory.Store, user, runID string) {
	t.Helper()
	if err := s.SaveRun(t.Context(), user, &typev1.RunResult{RunId: runID, ExitReason: "COMPLETED"}); err != nil {
		t.Fatalf("save %s: %v", runID, err)
	}
}

// claim claims a run at now and wants one.
func claim(t *testing.T, s memory.Store, now time.Time) memory.LearnJob {
	t.Helper()
	job, ok, err := s.ClaimLearning(t.Context(), now, lease)
	if err != nil || !ok {
		t.Fatalf("claim at %v = %v, %v, %v; want a run", now, job, ok, err)
	}
	return job
}

// noClaim wants no run to claim at now.
func noClaim(t *testing.T, s memory.Store, now time.Time) {
	t.Helper()
	if job, ok, err := s.ClaimLearning(t.Context(), now, lease); err != nil || ok {
		t.Fatalf("claim at %v = %v, %v, %v; want none", now, job, ok, err)
	}
}

// Saved runs are queued for learning once, in the order they were saved; a claim holds a run
// for its lease, a released or expired claim lets it be claimed again (counting the attempts),
// and a finished run leaves the queue for good, its learning shown by GetRun.
func testLearningQueue(t *testing.T, s memory.Store) {
	ctx := t.Context()
	noClaim(t, s, at(0))
	save(t, s, "alice", "run-1")
	save(t, s, "bob", "run-2")
	save(t, s, "alice", "run-1") // saved again: queued once

	first := claim(t, s, at(1))
	if first != (memory.LearnJob{RunID: "run-1", UserID: "alice", Attempts: 1}) {
		t.Errorf("first claim = %+v, want run-1 of alice, attempt 1", first)
	}
	second := claim(t, s, at(1))
	if second != (memory.LearnJob{RunID: "run-2", UserID: "bob", Attempts: 1}) {
		t.Errorf("second claim = %+v, want run-2 of bob, attempt 1", second)
	}
	noClaim(t, s, at(2)) // both are claimed

	if err := s.ReleaseLearning(ctx, "run-2"); err != nil {
		t.Fatal(err)
	}
	if job := claim(t, s, at(3)); job.RunID != "run-2" || job.Attempts != 2 {
		t.Errorf("claim after the release = %+v, want run-2, attempt 2", job)
	}
	noClaim(t, s, at(4))
	if job := claim(t, s, at(1).Add(lease)); job.RunID != "run-1" || job.Attempts != 2 {
		t.Errorf("claim once run-1's lease ended = %+v, want run-1, attempt 2", job)
	}

	learned := &typev1.RunLearning{
		Method: typev1.LearningMethod_LEARNING_METHOD_MODEL, MemoryIds: []string{"m1"}, DuplicateOf: []string{"m0"},
		Accounting: []*typev1.AccountingEntry{{Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Model: "small"}},
	}
	if err := s.FinishLearning(ctx, "run-1", learned); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishLearning(ctx, "run-2", nil); err != nil {
		t.Fatal(err)
	}
	noClaim(t, s, at(0).Add(10*lease))
	if err := s.ReleaseLearning(ctx, "run-1"); err != nil { // a late release changes nothing
		t.Fatal(err)
	}
	noClaim(t, s, at(0).Add(10*lease))
	save(t, s, "alice", "run-1") // saved again after learning: not learned again
	noClaim(t, s, at(0).Add(10*lease))

	res, _, err := s.GetRun(ctx, "run-1")
	if err != nil || !proto.Equal(res.GetLearning(), learned) {
		t.Errorf("GetRun(run-1).learning = %v, %v; want %v", res.GetLearning(), err, learned)
	}
	if res, _, err := s.GetRun(ctx, "run-2"); err != nil || res.GetLearning() != nil {
		t.Errorf("GetRun(run-2).learning = %v, %v; want none (nothing was recorded)", res.GetLearning(), err)
	}
	// A result saved with a learning does not store it: only FinishLearning records one.
	if err := s.SaveRun(ctx, "carol", &typev1.RunResult{RunId: "run-3", Learning: learned}); err != nil {
		t.Fatal(err)
	}
	if res, _, err := s.GetRun(ctx, "run-3"); err != nil || res.GetLearning() != nil {
		t.Errorf("GetRun(run-3).learning = %v, %v; want none", res.GetLearning(), err)
	}
}

// NextClaimEnd says when the earliest live claim on a queued run ends: a released claim, one
// run out, and a finished run's no longer count.
func testLearningClaimEnd(t *testing.T, s memory.Store) {
	ctx := t.Context()
	claimEnd := func(now time.Time) (time.Time, bool) {
		t.Helper()
		end, ok, err := s.NextClaimEnd(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		return end, ok
	}
	if end, ok := claimEnd(at(0)); ok {
		t.Errorf("claim end of an empty queue = %v", end)
	}
	save(t, s, "alice", "run-1")
	save(t, s, "alice", "run-2")
	save(t, s, "alice", "run-3")
	if end, ok := claimEnd(at(0)); ok {
		t.Errorf("claim end of a queue none claimed = %v", end)
	}
	claim(t, s, at(5)) // run-1 until at(5)+lease
	claim(t, s, at(3)) // run-2 until at(3)+lease
	claim(t, s, at(4)) // run-3 until at(4)+lease
	if end, ok := claimEnd(at(6)); !ok || !end.Equal(at(3).Add(lease)) {
		t.Errorf("claim end = %v, %v; want run-2's, %v", end, ok, at(3).Add(lease))
	}
	if err := s.ReleaseLearning(ctx, "run-2"); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishLearning(ctx, "run-3", nil); err != nil {
		t.Fatal(err)
	}
	if end, ok := claimEnd(at(6)); !ok || !end.Equal(at(5).Add(lease)) {
		t.Errorf("claim end once run-2 is released and run-3 learned from = %v, %v; want run-1's, %v", end, ok, at(5).Add(lease))
	}
	if end, ok := claimEnd(at(5).Add(lease)); ok {
		t.Errorf("claim end once run-1's claim ran out = %v", end)
	}
}

// A queued run keeps the W3C trace context of its first save, the run's trace, in which
// learning from it is traced; a save without one queues a run without one.
func testLearningTrace(t *testing.T, s memory.Store) {
	traced := func(traceID, spanID byte, state string) context.Context {
		t.Helper()
		ts, err := trace.ParseTraceState(state)
		if err != nil {
			t.Fatal(err)
		}
		return trace.ContextWithRemoteSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{15: traceID}, SpanID: trace.SpanID{7: spanID}, TraceFlags: trace.FlagsSampled, TraceState: ts,
		}))
	}
	for _, ctx := range []context.Context{traced(1, 2, "vendor=one"), traced(3, 4, "vendor=two")} { // saved twice: the first save's
		if err := s.SaveRun(ctx, "alice", &typev1.RunResult{RunId: "run-1", ExitReason: "COMPLETED"}); err != nil {
			t.Fatal(err)
		}
	}
	save(t, s, "bob", "run-2")
	want := memory.LearnJob{RunID: "run-1", UserID: "alice", Attempts: 1,
		Traceparent: "00-00000000000000000000000000000001-0000000000000002-01", Tracestate: "vendor=one"}
	if job := claim(t, s, at(1)); job != want {
		t.Errorf("claim = %+v, want %+v", job, want)
	}
	if job := claim(t, s, at(1)); job != (memory.LearnJob{RunID: "run-2", UserID: "bob", Attempts: 1}) {
		t.Errorf("claim = %+v, want run-2 of bob without a trace context", job)
	}
}

// Claimers at the same time never get the same run.
func testLearningConcurrent(t *testing.T, s memory.Store) {
	const runs, claimers = 20, 4
	for i := range runs {
		save(t, s, "alice", "run-"+string(rune('a'+i)))
	}
	var (
		mu      sync.Mutex
		claimed []string
		wg      sync.WaitGroup
	)
	for range claimers {
		wg.Go(func() {
			for {
				job, ok, err := s.ClaimLearning(t.Context(), at(1), lease)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				claimed = append(claimed, job.RunID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(claimed)
	if len(claimed) != runs || len(slices.Compact(slices.Clone(claimed))) != runs {
		t.Errorf("claimed %v: want each of the %d runs once", claimed, runs)
	}
}

// A memory that holds the same words as a fact, or (with vectors) a vector at least minCosine
// alike, duplicates it; the user's other collections and other users' memories never do.
func testDuplicate(t *testing.T, s memory.Store) {
	put(t, s, newMemory(t, "alice", "", "m1", at(1), "The user's favourite colour is green."), []float32{1, 0, 0})
	put(t, s, newMemory(t, "alice", "", "m2", at(2), "The user lives in Lisbon."), []float32{0, 1, 0})
	put(t, s, newMemory(t, "alice", "knowledge", "k1", at(3), "The office is in Porto."), []float32{0, 0, 1})
	put(t, s, newMemory(t, "bob", "", "b1", at(4), "The user works at Acme."), []float32{0, 0, 1})
	dup := func(user, collection, text string, vector []float32) string {
		t.Helper()
		id, err := s.DuplicateMemory(t.Context(), memory.SearchQuery{UserID: user, Collection: collection, Query: text, Vector: vector}, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, tc := range []struct {
		name, user, collection, text string
		vector                       []float32
		want                         string
	}{
		{"same words", "alice", "", "the user's FAVOURITE colour: green", nil, "m1"},
		{"fewer words", "alice", "", "The user's favourite colour.", nil, ""},
		{"more words", "alice", "", "The user's favourite colour is green and blue.", nil, ""},
		{"a word twice", "alice", "", "The user's favourite colour is green green.", nil, ""},
		{"alike vector", "alice", "", "The user resides in Lisbon, Portugal.", []float32{0.1, 1, 0}, "m2"},
		{"vector not alike enough", "alice", "", "The user visited Lisbon once.", []float32{0.5, 1, 0}, ""},
		{"another collection", "alice", "knowledge", "The user lives in Lisbon.", nil, ""},
		{"in that collection", "alice", "knowledge", "the office is in porto", nil, "k1"},
		{"another user", "alice", "", "The user works at Acme.", []float32{0, 0, 1}, ""},
		{"the other user's own", "bob", "", "The user works at Acme.", nil, "b1"},
	} {
		if got := dup(tc.user, tc.collection, tc.text, tc.vector); got != tc.want {
			t.Errorf("%s: DuplicateMemory(%s, %q, %q) = %q, want %q", tc.name, tc.user, tc.collection, tc.text, got, tc.want)
		}
	}
	// Deleted memories duplicate nothing.
	if err := s.DeleteMemory(t.Context(), "alice", "m1"); err != nil {
		t.Fatal(err)
	}
	if got := dup("alice", "", "The user's favourite colour is green.", nil); got != "" {
		t.Errorf("after deleting m1: %q", got)
	}
}

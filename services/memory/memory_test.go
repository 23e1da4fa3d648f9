package memory_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/memory"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tickingClock returns a Now that advances one second per call, so every stored memory has
// its own creation time.
func tickingClock() func() time.Time {
	var n atomic.Int64
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Second) }
}

func newClient(t *testing.T, opts memory.Options) memoryv1.MemoryServiceClient {
	t.Helper()
	if opts.Now == nil {
		opts.Now = tickingClock()
	}
	return memoryv1.NewMemoryServiceClient(grpctest.Serve(t, memory.New(opts).Register))
}

func user(text string) *typev1.Message {
	return &typev1.Message{Role: typev1.Role_ROLE_USER, Content: text}
}

func store(t *testing.T, c memoryv1.MemoryServiceClient, userID, collection, text string) string {
	t.Helper()
	resp, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: userID, Collection: collection, Content: user(text), ConversationId: "conv-1"})
	if err != nil {
		t.Fatalf("store %q: %v", text, err)
	}
	if !resp.GetStored() || resp.GetMemoryId() == "" {
		t.Fatalf("store %q: %v", text, resp)
	}
	return resp.GetMemoryId()
}

func ids(hits []*memoryv1.MemoryHit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.GetMemory().GetId()
	}
	return out
}

func TestIsolation(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	alice := store(t, c, "alice", "", "Alice's secret project is called Bluebird")
	bob := store(t, c, "bob", "", "Bob likes hiking in the Alps")

	t.Run("search sees only the user's memories", func(t *testing.T) {
		resp, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "bob", Query: "secret project bluebird"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetHits()) != 0 {
			t.Errorf("bob found %v", ids(resp.GetHits()))
		}
		resp, err = c.Search(ctx, &memoryv1.SearchRequest{UserId: "alice", Query: "secret project bluebird"})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(resp.GetHits()); len(got) != 1 || got[0] != alice {
			t.Errorf("alice found %v, want [%s]", got, alice)
		}
	})
	t.Run("list sees only the user's memories", func(t *testing.T) {
		resp, err := c.List(ctx, &memoryv1.ListRequest{UserId: "bob"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetMemories()) != 1 || resp.GetMemories()[0].GetId() != bob || resp.GetMemories()[0].GetUserId() != "bob" {
			t.Errorf("bob listed %v", resp.GetMemories())
		}
	})
	t.Run("another user's memory is not found on delete", func(t *testing.T) {
		_, err := c.Delete(ctx, &memoryv1.DeleteRequest{UserId: "bob", MemoryId: alice})
		grpctest.WantStageError(t, err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, alice)
		resp, err := c.List(ctx, &memoryv1.ListRequest{UserId: "alice"})
		if err != nil || len(resp.GetMemories()) != 1 {
			t.Fatalf("alice's memory is gone after bob's delete: %v %v", resp, err)
		}
	})
	t.Run("the owner deletes, once", func(t *testing.T) {
		resp, err := c.Delete(ctx, &memoryv1.DeleteRequest{UserId: "alice", MemoryId: alice})
		if err != nil || !resp.GetDeleted() {
			t.Fatalf("delete = %v, %v", resp, err)
		}
		_, err = c.Delete(ctx, &memoryv1.DeleteRequest{UserId: "alice", MemoryId: alice})
		grpctest.WantStageError(t, err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
		list, err := c.List(ctx, &memoryv1.ListRequest{UserId: "alice"})
		if err != nil || len(list.GetMemories()) != 0 {
			t.Errorf("alice still lists %v (%v)", list.GetMemories(), err)
		}
	})
}

func TestQuota(t *testing.T) {
	c := newClient(t, memory.Options{QuotaPerUser: 2})
	first := store(t, c, "alice", "", "one")
	store(t, c, "alice", "docs", "two") // the quota spans collections
	_, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "alice", Content: user("three")})
	grpctest.WantStageError(t, err, codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL, `user "alice" has 2 of 2 memories`)

	store(t, c, "bob", "", "bob's quota is his own")
	if _, err := c.Delete(t.Context(), &memoryv1.DeleteRequest{UserId: "alice", MemoryId: first}); err != nil {
		t.Fatal(err)
	}
	store(t, c, "alice", "", "three, after a delete freed a slot")
}

// Concurrent stores never exceed the quota.
func TestQuotaConcurrent(t *testing.T) {
	const quota = 10
	c := newClient(t, memory.Options{QuotaPerUser: quota})
	var ok, full atomic.Int32
	var wg sync.WaitGroup
	for i := range 3 * quota {
		wg.Go(func() {
			_, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "alice", Content: user(fmt.Sprintf("fact %d", i))})
			switch {
			case err == nil:
				ok.Add(1)
			case stageerr.FromError(err).Code == typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL:
				full.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != quota || full.Load() != 2*quota {
		t.Errorf("stored %d, full %d; want %d and %d", ok.Load(), full.Load(), quota, 2*quota)
	}
}

func TestImportance(t *testing.T) {
	c := newClient(t, memory.Options{})
	table := []struct {
		text     string
		min, max float64
	}{
		{"the weather was grey", 0.2, 0.2},
		{"the meeting moved to room 4", 0.3, 0.3},
		{"I prefer dark mode", 0.4, 0.4},
		{"my name is Ada", 0.4, 0.4},
		{"Remember: the deploy key rotates", 0.6, 0.6},
		{"Please remember that my name is Ada, I prefer tea and I was born in 1990", 1, 1},
	}
	for _, tc := range table {
		resp, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "u", Content: user(tc.text)})
		if err != nil {
			t.Fatal(err)
		}
		if s := resp.GetRelevanceScore(); s < tc.min-1e-9 || s > tc.max+1e-9 {
			t.Errorf("%q: relevance_score = %v, want %v..%v", tc.text, s, tc.min, tc.max)
		}
	}
	list, err := c.List(t.Context(), &memoryv1.ListRequest{UserId: "u"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.GetMemories() {
		if m.GetImportance() < 0.2 || m.GetImportance() > 1 {
			t.Errorf("%q: importance %v outside [0.2, 1]", m.GetContent(), m.GetImportance())
		}
	}
}

func TestSearchRanking(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	postgres := store(t, c, "u", "", "The production database is PostgreSQL 16 on the db01 host")
	both := store(t, c, "u", "", "Backups of the production database run nightly")
	backups := store(t, c, "u", "", "Backups are kept for thirty days")
	store(t, c, "u", "", "The user prefers tea over coffee")
	store(t, c, "u", "kb", "database database database in another collection")

	t.Run("ranked by BM25, best first, normalised", func(t *testing.T) {
		resp, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: "Which database runs PostgreSQL?"})
		if err != nil {
			t.Fatal(err)
		}
		hits := resp.GetHits()
		if got := ids(hits); len(got) != 2 || got[0] != postgres || got[1] != both {
			// Both mention the database; only the first also matches the rarer "postgresql".
			t.Fatalf("hits = %v, want [%s %s]", got, postgres, both)
		}
		if hits[0].GetRelevanceScore() != 1 {
			t.Errorf("top score = %v, want 1", hits[0].GetRelevanceScore())
		}
		if s := hits[1].GetRelevanceScore(); s <= 0 || s >= 1 {
			t.Errorf("second score = %v, want in (0, 1)", s)
		}
	})
	t.Run("more matching terms rank higher", func(t *testing.T) {
		resp, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: "nightly backups of the database"})
		if err != nil {
			t.Fatal(err)
		}
		got := ids(resp.GetHits())
		if len(got) != 3 || got[0] != both || !slices.Contains(got, backups) || !slices.Contains(got, postgres) {
			t.Errorf("hits = %v, want %s first, then %s and %s", got, both, backups, postgres)
		}
	})
	t.Run("min_score and limit", func(t *testing.T) {
		resp, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: "postgresql database", MinScore: 0.999})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(resp.GetHits()); len(got) != 1 || got[0] != postgres {
			t.Errorf("min_score hits = %v", got)
		}
		resp, err = c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: "backups database", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetHits()) != 1 {
			t.Errorf("limit 1 returned %d hits", len(resp.GetHits()))
		}
	})
	t.Run("collections are searched separately", func(t *testing.T) {
		resp, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Collection: "kb", Query: "database"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetHits()) != 1 || resp.GetHits()[0].GetMemory().GetCollection() != "kb" {
			t.Errorf("kb hits = %v", resp.GetHits())
		}
	})
	t.Run("no matching term, no hits", func(t *testing.T) {
		for _, q := range []string{"kubernetes", "the of and"} {
			resp, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: q})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetHits()) != 0 {
				t.Errorf("%q: hits %v", q, ids(resp.GetHits()))
			}
		}
	})
}

func TestSearchDefaultLimit(t *testing.T) {
	c := newClient(t, memory.Options{})
	for i := range memory.DefaultSearchLimit + 3 {
		store(t, c, "u", "", fmt.Sprintf("note number %d about golang", i))
	}
	resp, err := c.Search(t.Context(), &memoryv1.SearchRequest{UserId: "u", Query: "golang"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetHits()) != memory.DefaultSearchLimit {
		t.Errorf("hits = %d, want %d", len(resp.GetHits()), memory.DefaultSearchLimit)
	}
	for _, h := range resp.GetHits() {
		if h.GetRelevanceScore() != 1 {
			t.Errorf("equally relevant notes should all score 1, got %v", h.GetRelevanceScore())
		}
	}
}

func TestListPagination(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	var stored []string
	for i := range 7 {
		stored = append(stored, store(t, c, "u", "", fmt.Sprintf("memory %d", i)))
	}
	var listed []string
	token := ""
	pages := 0
	for {
		resp, err := c.List(ctx, &memoryv1.ListRequest{UserId: "u", PageSize: 3, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range resp.GetMemories() {
			listed = append(listed, m.GetId())
		}
		token = resp.GetNextPageToken()
		if token == "" {
			break
		}
		if pages > 3 {
			t.Fatal("pagination does not end")
		}
	}
	if pages != 3 {
		t.Errorf("pages = %d, want 3", pages)
	}
	if len(listed) != len(stored) {
		t.Fatalf("listed %d memories, want %d", len(listed), len(stored))
	}
	for i := range listed {
		if want := stored[len(stored)-1-i]; listed[i] != want {
			t.Errorf("listed[%d] = %s, want %s (newest first)", i, listed[i], want)
		}
	}

	t.Run("page size at the total has no next page", func(t *testing.T) {
		resp, err := c.List(ctx, &memoryv1.ListRequest{UserId: "u", PageSize: 7})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetMemories()) != 7 || resp.GetNextPageToken() != "" {
			t.Errorf("got %d memories, token %q", len(resp.GetMemories()), resp.GetNextPageToken())
		}
	})
	t.Run("bad token", func(t *testing.T) {
		for _, tok := range []string{"!!!", "bm90LWEtdG9rZW4"} { // the second is base64 of "not-a-token"
			_, err := c.List(ctx, &memoryv1.ListRequest{UserId: "u", PageToken: tok})
			grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "page_token")
		}
	})
}

// Memories stored in the same instant still page in a stable newest-first order.
func TestListSameInstant(t *testing.T) {
	instant := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newClient(t, memory.Options{Now: func() time.Time { return instant }})
	var stored []string
	for i := range 5 {
		stored = append(stored, store(t, c, "u", "", fmt.Sprintf("memory %d", i)))
	}
	var listed []string
	for token := ""; ; {
		resp, err := c.List(t.Context(), &memoryv1.ListRequest{UserId: "u", PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.GetMemories() {
			listed = append(listed, m.GetId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	if fmt.Sprint(listed) != fmt.Sprint(reverse(stored)) {
		t.Errorf("listed %v, want %v", listed, reverse(stored))
	}
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestListPageSizeLimits(t *testing.T) {
	c := newClient(t, memory.Options{})
	for i := range memory.MaxPageSize + 1 {
		store(t, c, "u", "", fmt.Sprintf("m%d", i))
	}
	for _, tc := range []struct {
		size int32
		want int
	}{{0, memory.DefaultPageSize}, {memory.MaxPageSize + 100, memory.MaxPageSize}} {
		resp, err := c.List(t.Context(), &memoryv1.ListRequest{UserId: "u", PageSize: tc.size})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetMemories()) != tc.want || resp.GetNextPageToken() == "" {
			t.Errorf("page_size %d: %d memories (token %q), want %d and a next page", tc.size, len(resp.GetMemories()), resp.GetNextPageToken(), tc.want)
		}
	}
}

// chain builds n linked transcript entries starting at seq first after prevHash.
func chain(first int64, prevHash string, n int) []*typev1.TranscriptEntry {
	var out []*typev1.TranscriptEntry
	for i := range int64(n) {
		seq := first + i
		h := fmt.Sprintf("h%d", seq)
		out = append(out, &typev1.TranscriptEntry{Seq: seq, PrevHash: prevHash, Hash: h, State: typev1.RunState(1)})
		prevHash = h
	}
	return out
}

func TestAppendTranscript(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	resp, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "run-1", Entries: chain(1, "", 3)})
	if err != nil || resp.GetLength() != 3 {
		t.Fatalf("first append = %v, %v", resp, err)
	}
	resp, err = c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "run-1", Entries: chain(4, "h3", 2)})
	if err != nil || resp.GetLength() != 5 {
		t.Fatalf("second append = %v, %v", resp, err)
	}

	broken := chain(6, "h5", 2)
	broken[1].PrevHash = "forged"
	table := []struct {
		name    string
		entries []*typev1.TranscriptEntry
		parts   []string
	}{
		{"seq gap", chain(7, "h5", 1), []string{"entries[0].seq is 7, want 6", "5 entries"}},
		{"seq replay", chain(5, "h4", 1), []string{"entries[0].seq is 5, want 6"}},
		{"wrong prev_hash", chain(6, "h4", 1), []string{`entries[0].prev_hash is "h4", want "h5"`}},
		{"broken link inside the batch", broken, []string{`entries[1].prev_hash is "forged", want "h6"`}},
		{"non-consecutive seqs", append(chain(6, "h5", 1), chain(8, "h6", 1)...), []string{"entries[1].seq is 8, want 7"}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "run-1", Entries: tc.entries})
			grpctest.WantStageError(t, err, codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, tc.parts...)
		})
	}
	t.Run("a new run starts at seq 1 with an empty prev_hash", func(t *testing.T) {
		_, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "run-2", Entries: chain(1, "h0", 1)})
		grpctest.WantStageError(t, err, codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, `want ""`)
		_, err = c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "run-2", Entries: chain(2, "h1", 1)})
		grpctest.WantStageError(t, err, codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, "seq is 2, want 1")
	})
	t.Run("failed appends stored nothing", func(t *testing.T) {
		resp, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "run-1", Entries: chain(6, "h5", 1)})
		if err != nil || resp.GetLength() != 6 {
			t.Fatalf("append after failures = %v, %v", resp, err)
		}
	})
}

func TestRuns(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	result := &typev1.RunResult{
		RunId:      "run-1",
		ExitReason: "COMPLETED",
		Success:    true,
		Transcript: chain(1, "", 1),
		FinalReport: &typev1.FinalReport{
			Status:  typev1.ReportStatus_REPORT_STATUS_SUCCESS,
			Content: "42",
		},
	}
	saved, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{Result: result, UserId: "alice"})
	if err != nil || saved.GetRunId() != "run-1" {
		t.Fatalf("save = %v, %v", saved, err)
	}
	got, err := c.GetRun(ctx, &memoryv1.GetRunRequest{RunId: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	if r := got.GetResult(); r.GetFinalReport().GetContent() != "42" || !r.GetSuccess() || len(r.GetTranscript()) != 1 {
		t.Errorf("got %v", r)
	}

	t.Run("the stored transcript chain replaces the result's", func(t *testing.T) {
		if _, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "run-1", Entries: chain(1, "", 4)}); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetRun(ctx, &memoryv1.GetRunRequest{RunId: "run-1"})
		if err != nil {
			t.Fatal(err)
		}
		tr := got.GetResult().GetTranscript()
		if len(tr) != 4 || tr[3].GetHash() != "h4" || tr[3].GetPrevHash() != "h3" {
			t.Errorf("transcript = %v", tr)
		}
	})
	t.Run("a later save replaces the earlier one", func(t *testing.T) {
		result.ExitReason = "MAX_TURNS_REACHED"
		result.Success = false
		if _, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{Result: result}); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetRun(ctx, &memoryv1.GetRunRequest{RunId: "run-1"})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetResult().GetExitReason() != "MAX_TURNS_REACHED" || got.GetResult().GetSuccess() {
			t.Errorf("got %v", got.GetResult())
		}
	})
	t.Run("unknown run", func(t *testing.T) {
		_, err := c.GetRun(ctx, &memoryv1.GetRunRequest{RunId: "nope"})
		grpctest.WantStageError(t, err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, `run "nope" not found`)
	})
	t.Run("a transcript alone is not a saved run", func(t *testing.T) {
		if _, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "run-3", Entries: chain(1, "", 1)}); err != nil {
			t.Fatal(err)
		}
		_, err := c.GetRun(ctx, &memoryv1.GetRunRequest{RunId: "run-3"})
		grpctest.WantStageError(t, err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
	})
}

// docMeta is the metadata of a document whose source is source.
func docMeta(t *testing.T, source string) *structpb.Struct {
	t.Helper()
	meta, err := structpb.NewStruct(map[string]any{memory.MetaSource: source})
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// failingStore fails every operation with a database error.
type failingStore struct{ memory.Store }

var errDisk = errors.New("disk I/O error")

func (failingStore) PutMemory(context.Context, *memoryv1.Memory, []float32, int) error {
	return errDisk
}
func (failingStore) PutDocument(context.Context, memory.Document, int) ([]string, error) {
	return nil, errDisk
}
func (failingStore) SearchMemories(context.Context, memory.SearchQuery) ([]*memoryv1.MemoryHit, error) {
	return nil, errDisk
}
func (failingStore) ListMemories(context.Context, memory.ListQuery) ([]*memoryv1.Memory, error) {
	return nil, errDisk
}
func (failingStore) DeleteMemory(context.Context, string, string) error { return errDisk }
func (failingStore) AppendTranscript(context.Context, string, []*typev1.TranscriptEntry) (int64, error) {
	return 0, errDisk
}
func (failingStore) SaveRun(context.Context, string, *typev1.RunResult) error { return errDisk }
func (failingStore) GetRun(context.Context, string) (*typev1.RunResult, string, error) {
	return nil, "", errDisk
}
func (failingStore) DuplicateMemory(context.Context, memory.SearchQuery, float64) (string, error) {
	return "", errDisk
}
func (failingStore) ClaimLearning(context.Context, time.Time, time.Duration) (memory.LearnJob, bool, error) {
	return memory.LearnJob{}, false, errDisk
}
func (failingStore) NextClaimEnd(context.Context, time.Time) (time.Time, bool, error) {
	return time.Time{}, false, errDisk
}
func (failingStore) FinishLearning(context.Context, string, *typev1.RunLearning) error {
	return errDisk
}
func (failingStore) ReleaseLearning(context.Context, string) error { return errDisk }

func TestStorageError(t *testing.T) {
	c := newClient(t, memory.Options{Store: failingStore{}})
	ctx := t.Context()
	calls := map[string]func() error{
		"Store": func() error {
			_, err := c.Store(ctx, &memoryv1.StoreRequest{UserId: "u", Content: user("x")})
			return err
		},
		"StoreDocument": func() error {
			_, err := c.StoreDocument(ctx, &memoryv1.StoreDocumentRequest{UserId: "u",
				Metadata: docMeta(t, "a.md"), Chunks: []*memoryv1.DocumentChunk{{Content: "x"}}})
			return err
		},
		"Search": func() error {
			_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: "x"})
			return err
		},
		"List": func() error {
			_, err := c.List(ctx, &memoryv1.ListRequest{UserId: "u"})
			return err
		},
		"Delete": func() error {
			_, err := c.Delete(ctx, &memoryv1.DeleteRequest{UserId: "u", MemoryId: "m"})
			return err
		},
		"AppendTranscript": func() error {
			_, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "r", Entries: chain(1, "", 1)})
			return err
		},
		"SaveRun": func() error {
			_, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{Result: &typev1.RunResult{RunId: "r"}})
			return err
		},
		"GetRun": func() error {
			_, err := c.GetRun(ctx, &memoryv1.GetRunRequest{RunId: "r"})
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			grpctest.WantStageError(t, err, codes.Unavailable, typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR, "disk I/O error")
			if !stageerr.FromError(err).Retryable() {
				t.Error("STORAGE_ERROR should be retryable")
			}
		})
	}
}

func TestInvalidInput(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	table := []struct {
		name string
		call func() error
		part string
	}{
		{"Store without user", func() error {
			_, err := c.Store(ctx, &memoryv1.StoreRequest{Content: user("x")})
			return err
		}, "user_id"},
		{"Store without content", func() error {
			_, err := c.Store(ctx, &memoryv1.StoreRequest{UserId: "u"})
			return err
		}, "content"},
		{"Store with blank content", func() error {
			_, err := c.Store(ctx, &memoryv1.StoreRequest{UserId: "u", Content: user("  \n")})
			return err
		}, "content"},
		{"StoreDocument without a source", func() error {
			_, err := c.StoreDocument(ctx, &memoryv1.StoreDocumentRequest{UserId: "u",
				Chunks: []*memoryv1.DocumentChunk{{Content: "x"}}})
			return err
		}, `metadata["source"]: must be a non-empty string naming the document`},
		{"StoreDocument with a folder that is no string", func() error {
			meta := docMeta(t, "a.md")
			meta.Fields[memory.MetaFolder] = structpb.NewNumberValue(1)
			_, err := c.StoreDocument(ctx,
				&memoryv1.StoreDocumentRequest{UserId: "u", Metadata: meta})
			return err
		}, `metadata["folder"]: must be a string`},
		{"StoreDocument with a blank chunk", func() error {
			_, err := c.StoreDocument(ctx, &memoryv1.StoreDocumentRequest{UserId: "u",
				Metadata: docMeta(t, "a.md"),
				Chunks:   []*memoryv1.DocumentChunk{{Content: "x"}, {Content: " \n"}}})
			return err
		}, "chunks[1].content must not be empty"},
		{"StoreDocument with a chunk over the content limit", func() error {
			_, err := c.StoreDocument(ctx, &memoryv1.StoreDocumentRequest{UserId: "u",
				Metadata: docMeta(t, "a.md"), Chunks: []*memoryv1.DocumentChunk{
					{Content: strings.Repeat("a", memory.MaxContentBytes+1)}}})
			return err
		}, "chunks[0].content: at most 32768 bytes, got 32769"},
		{"StoreDocument with a chunk's metadata key the document's has", func() error {
			_, err := c.StoreDocument(ctx, &memoryv1.StoreDocumentRequest{UserId: "u",
				Metadata: docMeta(t, "a.md"), Chunks: []*memoryv1.DocumentChunk{
					{Content: "x", Metadata: docMeta(t, "b.md")}}})
			return err
		}, `chunks[0].metadata["source"]: the document's metadata has it`},
		{"StoreDocument with metadata over the limit", func() error {
			own, err := structpb.NewStruct(
				map[string]any{"pad": strings.Repeat("p", memory.MaxMetadataBytes)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.StoreDocument(ctx, &memoryv1.StoreDocumentRequest{UserId: "u",
				Metadata: docMeta(t, "a.md"),
				Chunks:   []*memoryv1.DocumentChunk{{Content: "x", Metadata: own}}})
			return err
		}, "chunks[0].metadata: at most 16384 bytes encoded with the document's metadata"},
		{"StoreDocument with a NaN", func() error {
			_, err := c.StoreDocument(ctx, &memoryv1.StoreDocumentRequest{UserId: "u",
				Metadata: docMeta(t, "a.md"), Chunks: []*memoryv1.DocumentChunk{{Content: "x",
					Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
						"score": structpb.NewNumberValue(math.NaN())}}}}})
			return err
		}, `chunks[0].metadata["score"]: must be a finite number, got NaN`},
		{"StoreDocument with a chunk twice", func() error {
			_, err := c.StoreDocument(ctx, &memoryv1.StoreDocumentRequest{UserId: "u",
				Metadata: docMeta(t, "a.md"), Chunks: []*memoryv1.DocumentChunk{
					{Content: "x"}, {Content: "y"}, {Content: "x"}}})
			return err
		}, "chunks[2]: the same content and metadata as chunks[0]"},
		{"Search without user", func() error {
			_, err := c.Search(ctx, &memoryv1.SearchRequest{Query: "x"})
			return err
		}, "user_id"},
		{"Search without query", func() error {
			_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: " "})
			return err
		}, "query"},
		{"Search with negative limit", func() error {
			_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: "x", Limit: -1})
			return err
		}, "limit"},
		{"Search with min_score above 1", func() error {
			_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: "x", MinScore: 1.5})
			return err
		}, "min_score"},
		{"Search with negative min_score", func() error {
			_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: "x", MinScore: -0.1})
			return err
		}, "min_score"},
		{"List without user", func() error {
			_, err := c.List(ctx, &memoryv1.ListRequest{})
			return err
		}, "user_id"},
		{"List with negative page size", func() error {
			_, err := c.List(ctx, &memoryv1.ListRequest{UserId: "u", PageSize: -1})
			return err
		}, "page_size"},
		{"Delete without user", func() error {
			_, err := c.Delete(ctx, &memoryv1.DeleteRequest{MemoryId: "m"})
			return err
		}, "user_id"},
		{"Delete without memory id", func() error {
			_, err := c.Delete(ctx, &memoryv1.DeleteRequest{UserId: "u"})
			return err
		}, "memory_id"},
		{"AppendTranscript without run", func() error {
			_, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{Entries: chain(1, "", 1)})
			return err
		}, "run_id"},
		{"AppendTranscript without entries", func() error {
			_, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "r"})
			return err
		}, "entries"},
		{"AppendTranscript with an unhashed entry", func() error {
			_, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "r", Entries: []*typev1.TranscriptEntry{{Seq: 1}}})
			return err
		}, "entries[0].hash"},
		{"SaveRun without result", func() error {
			_, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{})
			return err
		}, "result.run_id"},
		{"SaveRun without run id", func() error {
			_, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{Result: &typev1.RunResult{ExitReason: "COMPLETED"}})
			return err
		}, "result.run_id"},
		{"GetRun without run", func() error {
			_, err := c.GetRun(ctx, &memoryv1.GetRunRequest{})
			return err
		}, "run_id"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			grpctest.WantStageError(t, tc.call(), codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.part)
		})
	}
}

// TestSizeLimits (issue 11.5): a memory's content and every RPC's user_id take a value at the
// limit and refuse one just over it with INVALID_ARGUMENT naming the field and the limit.
func TestSizeLimits(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	longUser := func(n int) string { return strings.Repeat("u", n) }
	calls := map[string]func(userID string) error{
		"Store": func(userID string) error {
			_, err := c.Store(ctx, &memoryv1.StoreRequest{UserId: userID, Content: user("x")})
			return err
		},
		"Search": func(userID string) error {
			_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: userID, Query: "x"})
			return err
		},
		"List": func(userID string) error {
			_, err := c.List(ctx, &memoryv1.ListRequest{UserId: userID})
			return err
		},
		"Delete": func(userID string) error {
			_, err := c.Delete(ctx, &memoryv1.DeleteRequest{UserId: userID, MemoryId: "m"})
			return err
		},
	}
	for name, call := range calls {
		if err := call(longUser(memory.MaxUserIDBytes)); status.Code(err) == codes.InvalidArgument {
			t.Errorf("%s with a user_id at the limit: %v", name, err)
		}
		err := call(longUser(memory.MaxUserIDBytes + 1))
		grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "user_id: at most 256 bytes, got 257")
	}

	if _, err := c.Store(ctx, &memoryv1.StoreRequest{UserId: "u", Content: user(strings.Repeat("a", memory.MaxContentBytes))}); err != nil {
		t.Errorf("Store with content at the limit: %v", err)
	}
	_, err := c.Store(ctx, &memoryv1.StoreRequest{UserId: "u", Content: user(strings.Repeat("a", memory.MaxContentBytes+1))})
	grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "content.content: at most 32768 bytes, got 32769")

	// A collection is kept with every term of a memory, its metadata with the memory.
	name := func(n int) string { return strings.Repeat("n", n) }
	metadata := func(n int) *structpb.Struct { // encodes to n bytes
		return &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue(name(n - 12))}}
	}
	if got := proto.Size(metadata(memory.MaxMetadataBytes)); got != memory.MaxMetadataBytes {
		t.Fatalf("metadata(%d) encodes to %d bytes", memory.MaxMetadataBytes, got)
	}
	for _, tc := range []struct {
		field    string
		at, over *memoryv1.StoreRequest
	}{
		{"collection", &memoryv1.StoreRequest{Collection: name(memory.MaxNameBytes)}, &memoryv1.StoreRequest{Collection: name(memory.MaxNameBytes + 1)}},
		{"conversation_id", &memoryv1.StoreRequest{ConversationId: name(memory.MaxNameBytes)}, &memoryv1.StoreRequest{ConversationId: name(memory.MaxNameBytes + 1)}},
		{"metadata", &memoryv1.StoreRequest{Metadata: metadata(memory.MaxMetadataBytes)}, &memoryv1.StoreRequest{Metadata: metadata(memory.MaxMetadataBytes + 1)}},
	} {
		for _, req := range []*memoryv1.StoreRequest{tc.at, tc.over} {
			req.UserId, req.Content = "u", user("x")
		}
		if _, err := c.Store(ctx, tc.at); err != nil {
			t.Errorf("Store with %s at the limit: %v", tc.field, err)
		}
		_, err := c.Store(ctx, tc.over)
		grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.field+": at most ")
	}
	// A collection no memory can be stored in is refused by Search and List as by Store, not
	// answered as an empty collection.
	collections := map[string]func(collection string) error{
		"Search": func(collection string) error {
			_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Query: "x", Collection: collection})
			return err
		},
		"List": func(collection string) error {
			_, err := c.List(ctx, &memoryv1.ListRequest{UserId: "u", Collection: collection})
			return err
		},
	}
	for rpc, call := range collections {
		if err := call(name(memory.MaxNameBytes)); err != nil {
			t.Errorf("%s with a collection at the limit: %v", rpc, err)
		}
		grpctest.WantStageError(t, call(name(memory.MaxNameBytes+1)), codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT,
			"collection: at most 256 bytes, got 257")
	}

	// A query as long as a run's message, whose goal the context stage searches with, is
	// searched; a longer one was tokenised, ranked against every memory and embedded too,
	// whatever its size.
	query := func(n int) *memoryv1.SearchRequest {
		return &memoryv1.SearchRequest{UserId: "u", Query: strings.Repeat("q", n)}
	}
	if _, err := c.Search(ctx, query(memory.MaxQueryBytes)); err != nil {
		t.Errorf("Search with a query at the limit: %v", err)
	}
	_, err = c.Search(ctx, query(memory.MaxQueryBytes+1))
	invalid := typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT
	grpctest.WantStageError(t, err, codes.InvalidArgument, invalid, "query: at most 65536 bytes, got 65537")

	// A memory id is a UUID: a longer one names no memory, and was echoed whole in NOT_FOUND.
	del := func(n int) error {
		_, err := c.Delete(ctx, &memoryv1.DeleteRequest{UserId: "u", MemoryId: name(n)})
		return err
	}
	notFound := typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND
	grpctest.WantStageError(t, del(memory.MaxNameBytes), codes.NotFound, notFound, "not found")
	grpctest.WantStageError(t, del(1<<20), codes.InvalidArgument, invalid,
		"memory_id: at most 256 bytes, got 1048576")
}

// TestRunLimits: every call that names a run takes a run id as the README allows (letters,
// digits, '_' and '-', at most 128 bytes) and refuses any other with INVALID_ARGUMENT naming the
// field and the rule, and SaveRun, as every call of the stage, a user_id over 256 bytes; they
// were stored, keyed and traced whatever their size.
func TestRunLimits(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	atLimit := strings.Repeat("r", 128)
	if _, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: atLimit, Entries: chain(1, "", 1)}); err != nil {
		t.Fatalf("AppendTranscript with a run id at the limit: %v", err)
	}
	if _, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{UserId: strings.Repeat("u", memory.MaxUserIDBytes), Result: &typev1.RunResult{RunId: atLimit}}); err != nil {
		t.Fatalf("SaveRun with a run id and a user_id at the limits: %v", err)
	}
	if _, err := c.GetRun(ctx, &memoryv1.GetRunRequest{RunId: atLimit}); err != nil {
		t.Fatalf("GetRun with a run id at the limit: %v", err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"AppendTranscript with a run id over 128 bytes", func() error {
			_, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: atLimit + "r", Entries: chain(1, "", 1)})
			return err
		}, "run_id: run id is 129 bytes long; at most 128 are allowed"},
		{"AppendTranscript with a dotted run id", func() error {
			_, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "a.b", Entries: chain(1, "", 1)})
			return err
		}, `run_id: run id "a.b" contains '.' at byte 1`},
		{"SaveRun with a run id over 128 bytes", func() error {
			_, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{Result: &typev1.RunResult{RunId: atLimit + "r"}})
			return err
		}, "result.run_id: run id is 129 bytes long"},
		{"SaveRun with a user_id over 256 bytes", func() error {
			_, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{UserId: strings.Repeat("u", memory.MaxUserIDBytes+1), Result: &typev1.RunResult{RunId: "r"}})
			return err
		}, "user_id: at most 256 bytes, got 257"},
		{"GetRun with a run id over 128 bytes", func() error {
			_, err := c.GetRun(ctx, &memoryv1.GetRunRequest{RunId: atLimit + "r"})
			return err
		}, "run_id: run id is 129 bytes long"},
		{"GetRun with a run id with a space", func() error {
			_, err := c.GetRun(ctx, &memoryv1.GetRunRequest{RunId: "a b"})
			return err
		}, `run_id: run id "a b" contains ' '`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			grpctest.WantStageError(t, tc.call(), codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.want)
		})
	}
}

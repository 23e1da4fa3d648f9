package memory

import (
	"context"
	"errors"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Store persists memories, run transcripts and run results. Implementations must be safe for
// concurrent use, must never let one user's memories reach another user's queries, and keep
// their own copies: changing a value after passing it in, or one returned, changes nothing
// stored. Search ranking is shared by every implementation (see the package documentation),
// so all stores rank the same data the same way.
//
// A Store reports the domain conditions below with ErrQuotaExceeded, ErrNotFound and the
// FAILED_PRECONDITION error of VerifyAppend; the service turns them into stage errors. Any
// other error is a storage failure and reaches clients as STORAGE_ERROR.
type Store interface {
	// PutMemory stores m, whose id, user and creation time are set, with its embedding vector
	// (nil when it has none), unless m's user already holds quota memories (over all
	// collections): then it returns ErrQuotaExceeded.
	PutMemory(ctx context.Context, m *memoryv1.Memory, vector []float32, quota int) error
	// PutDocument replaces the memories of doc.UserID that hold a chunk of the document
	// doc.Name (DocumentName), and those with the documentKey of one of doc.Chunks, with
	// doc.Chunks, as a unit, and returns the ids of the memories it replaced: concurrent
	// PutDocuments of one document leave the chunks of one of them, the last, never some of
	// each. When the user would then hold more than quota memories (and more than before),
	// it changes nothing and returns ErrQuotaExceeded.
	PutDocument(ctx context.Context, doc Document, quota int) (replaced []string, err error)
	// SearchMemories ranks the memories of q.UserID in q.Collection against q.Query (and
	// q.Vector when set). Hits have scores in (0, 1], at least q.MinScore, most relevant
	// first (equal scores newest first), at most q.Limit of them.
	SearchMemories(ctx context.Context, q SearchQuery) ([]*memoryv1.MemoryHit, error)
	// ListMemories returns at most q.Limit memories of q.UserID in q.Collection, newest first
	// (by creation time, then by id, both descending), starting after q.After when set.
	ListMemories(ctx context.Context, q ListQuery) ([]*memoryv1.Memory, error)
	// DeleteMemory deletes the memory id of userID; ErrNotFound when userID has no such
	// memory (including when the id belongs to another user).
	DeleteMemory(ctx context.Context, userID, id string) error
	// AppendTranscript appends entries to the transcript of runID after checking, atomically
	// with the append, that they continue the stored chain (VerifyAppend). It returns the
	// transcript's new length.
	AppendTranscript(ctx context.Context, runID string, entries []*typev1.TranscriptEntry) (int64, error)
	// SaveRun stores the result of a run for userID, replacing an earlier save of that run,
	// without its learning (GetRun sets that). The first save of a run also queues it for
	// learning (ClaimLearning), atomically with the save, so a saved run is never left
	// unlearned, with the trace context of ctx (telemetry.TraceContextOf), which the job carries.
	SaveRun(ctx context.Context, userID string, result *typev1.RunResult) error
	// GetRun returns the stored result of runID, with its transcript replaced by the stored
	// chain when entries were appended for the run and its learning set when FinishLearning
	// recorded one, and the user it was saved for; ErrNotFound when no result was saved.
	GetRun(ctx context.Context, runID string) (result *typev1.RunResult, userID string, err error)
	// DuplicateMemory returns the id of a memory of q.UserID in q.Collection that holds what
	// q.Query says: the same words (the same terms as many times each, so case, punctuation
	// and stopwords aside), or, when q.Vector is set, a vector whose cosine similarity with it
	// is at least minCosine (the most similar one). It returns "" when no memory does.
	DuplicateMemory(ctx context.Context, q SearchQuery, minCosine float64) (string, error)
	// ClaimLearning claims a run queued for learning whose last claim ended by now, the
	// earliest queued first: no other ClaimLearning returns it before now+lease. The claim
	// counts in the job's Attempts. ok is false when no run waits.
	ClaimLearning(ctx context.Context, now time.Time, lease time.Duration) (job LearnJob, ok bool, err error)
	// NextClaimEnd returns the earliest end, after now, of a claim on a run still queued for
	// learning: when ClaimLearning may next return a run although it returns none at now (one
	// whose learner crashed). ok is false when no queued run is claimed past now.
	NextClaimEnd(ctx context.Context, now time.Time) (end time.Time, ok bool, err error)
	// FinishLearning records what learning from a claimed run did (nil: nothing worth
	// showing) and takes the run off the queue for good.
	FinishLearning(ctx context.Context, runID string, learned *typev1.RunLearning) error
	// ReleaseLearning ends the claim on a run, which stays queued for the next ClaimLearning.
	ReleaseLearning(ctx context.Context, runID string) error
}

// Document is the chunks of one document, which Store.PutDocument stores in place of the
// chunks stored before.
type Document struct {
	// UserID owns the document.
	UserID string
	// Name is the DocumentName of the document's chunks, not "".
	Name string
	// Chunks are the document's memories, each of UserID with its id and creation time set
	// and Name as its DocumentName, no two with the same documentKey.
	Chunks []*memoryv1.Memory
	// Vectors are the embedding vectors of Chunks, in order, nil for a chunk without one; nil
	// when no chunk has one.
	Vectors [][]float32
}

// vector returns the embedding vector of the document's chunk i, nil when it has none.
func (d Document) vector(i int) []float32 {
	if i < len(d.Vectors) {
		return d.Vectors[i]
	}
	return nil
}

// LearnJob is a finished run queued for learning.
type LearnJob struct {
	// RunID names the run.
	RunID string
	// UserID is the run's user, whose memory learns.
	UserID string
	// Attempts counts the claims of the job, this one included.
	Attempts int
	// Traceparent and Tracestate are the W3C trace context of the first save of the run (the
	// run's trace), in which learning from it is traced; empty when the save had none.
	Traceparent, Tracestate string
}

// SearchQuery is a ranked search over one user's memories.
type SearchQuery struct {
	// UserID owns the memories searched.
	UserID string
	// Collection is searched ("" is personal memory).
	Collection string
	// Query is the text to rank against.
	Query string
	// Vector is the embedding of Query; nil ranks by BM25 alone.
	Vector []float32
	// Limit is the maximum number of hits.
	Limit int
	// MinScore is the lowest normalised score returned.
	MinScore float64
}

// ListQuery is one page of one user's memories.
type ListQuery struct {
	// UserID owns the memories listed.
	UserID string
	// Collection is listed ("" is personal memory).
	Collection string
	// After, when set, is the position of the last memory of the previous page.
	After *Cursor
	// Limit is the maximum number of memories.
	Limit int
}

// Cursor is a position in the newest-first order of memories.
type Cursor struct {
	// CreatedAt is the creation time of the memory at the position.
	CreatedAt time.Time
	// ID is the id of the memory at the position.
	ID string
}

// Before reports whether a memory created at t with the given id comes after the cursor in
// newest-first order, i.e. is older (or as old, with a smaller id).
func (c Cursor) Before(t time.Time, id string) bool {
	if !t.Equal(c.CreatedAt) {
		return t.Before(c.CreatedAt)
	}
	return id < c.ID
}

// Errors a Store returns for domain conditions.
var (
	// ErrQuotaExceeded means the user already holds as many memories as the quota allows.
	ErrQuotaExceeded = errors.New("memory quota exceeded")
	// ErrNotFound means the memory or run does not exist (for that user).
	ErrNotFound = errors.New("not found")
)

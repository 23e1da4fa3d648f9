package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Metadata keys of a learned fact.
const (
	// MetaRunID is the run the fact was learned from.
	MetaRunID = "run_id"
	// MetaLearnedBy is who picked it: "rules" or "model".
	MetaLearnedBy = "learned_by"
)

// Learning's timing.
const (
	// LearnTimeout bounds learning from one run: the model's answer, the embedding of the facts
	// and their storing.
	LearnTimeout = 90 * time.Second
	// DefaultFactsTimeout bounds the memory model's answer (Options.FactsTimeout): a model
	// that has not answered by then is given up and the rules pick the facts, with the rest
	// of LearnTimeout to embed and store them.
	DefaultFactsTimeout = 60 * time.Second
	// LearnLease is how long a claim on a queued run lasts, longer than LearnTimeout so that a
	// run is never learned from twice at once; the runs of a learner that crashed wait that
	// long for another.
	LearnLease = 2 * time.Minute
	// LearnRetry is how long learning waits to start again after a storage failure; it doubles
	// with each failure in a row, up to LearnRetryMax.
	LearnRetry = time.Second
	// LearnRetryMax bounds the wait after storage failures in a row.
	LearnRetryMax = time.Minute
	// MaxLearnAttempts is how many times learning from a run may be cut off (by crashes)
	// before the run is given up.
	MaxLearnAttempts = 3
)

// attrLearnAttempt is the attribute of an agentmesh.memory.learn span that counts the claims
// of its run (LearnJob.Attempts).
const attrLearnAttempt = attribute.Key("agentmesh.memory.learn.attempt")

// learner drains the queue of saved runs to learn from, in one goroutine at a time.
type learner struct {
	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	running  bool        // a goroutine drains the queue
	draining bool        // Drain: no more learning starts
	again    bool        // a run was queued while it drained: it looks once more before it stops
	wake     *time.Timer // drains the queue again when a claim of another learner runs out
	failures int         // storage failures in a row, which set the wait before the next drain
}

// learnRetry is the wait before draining again after failures storage failures in a row:
// LearnRetry, doubled for each failure after the first, at most LearnRetryMax.
func learnRetry(failures int) time.Duration {
	wait := LearnRetry
	for range min(failures-1, 16) {
		wait *= 2
	}
	return min(wait, LearnRetryMax)
}

// learnSoon makes sure a goroutine learns from the queued runs (see SaveRun), unless the
// service is closed.
func (s *Service) learnSoon() {
	l := &s.learner
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.ctx.Err() != nil, l.draining: // the run stays queued for the next learner
	case l.running:
		l.again = true
	default:
		l.running = true
		l.wg.Add(1)
		go s.drain()
	}
}

// drain learns from the queued runs one at a time until none waits. When the runs left are
// claimed by other learners (one that crashed, or another replica), it drains the queue again
// once the first of those claims runs out (Store.NextClaimEnd), so a run whose learner crashed
// is learned from then, whether or not another run is saved. It stops at a storage failure,
// leaving the queue as it is, and drains it again after learnRetry (or at the next save,
// whichever comes first), so that learning resumes by itself once the storage is back.
func (s *Service) drain() {
	l := &s.learner
	defer l.wg.Done()
	for {
		l.mu.Lock()
		if l.draining { // the runs left stay queued for the next learner
			l.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		job, ok, err := s.store.ClaimLearning(l.ctx, s.now(), LearnLease)
		if err == nil && ok {
			err = s.learnFrom(l.ctx, job)
		}
		var claimEnd time.Time // when a run another learner holds may be claimed
		if err == nil && !ok {
			var claimed bool
			if claimEnd, claimed, err = s.store.NextClaimEnd(l.ctx, s.now()); !claimed {
				claimEnd = time.Time{}
			}
		}
		if err != nil {
			if l.ctx.Err() == nil {
				s.log.ErrorContext(l.ctx, "learning from finished runs stopped; it starts again in a while "+
					"(from 1 s, doubling to 1 min) or at the next saved run", "error", err)
			}
			ok = false
		}
		if !ok {
			l.mu.Lock()
			if err != nil || !l.again {
				l.running = false
				switch {
				case err != nil:
					l.failures++
					s.wakeAt(s.now().Add(learnRetry(l.failures)))
				case !claimEnd.IsZero():
					l.failures = 0
					s.wakeAt(claimEnd)
				default:
					l.failures = 0
				}
				l.mu.Unlock()
				return
			}
			l.again = false
			l.mu.Unlock()
		}
	}
}

// wakeAt drains the queue again at t, by the service's clock, unless the service is closed.
// s.learner.mu is held.
func (s *Service) wakeAt(t time.Time) {
	l := &s.learner
	if l.ctx.Err() != nil {
		return
	}
	if l.wake != nil {
		l.wake.Stop()
	}
	l.wake = time.AfterFunc(max(t.Sub(s.now()), 0), s.learnSoon)
}

// Drain lets the learning in flight finish, for as long as ctx lets it, and starts no more:
// the runs still queued wait for the next learner (this service started again, or another
// replica on the same store). Close then cuts off what is left. It implements server.Drainer:
// a stopping memory stage reports NOT_SERVING and serves its calls meanwhile.
func (s *Service) Drain(ctx context.Context) {
	l := &s.learner
	l.mu.Lock()
	l.draining = true
	if l.wake != nil {
		l.wake.Stop()
	}
	l.mu.Unlock()
	learned := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(learned)
	}()
	select {
	case <-learned:
	case <-ctx.Done():
	}
}

// stopLearning ends learning and waits for it: a run being learned from stays queued.
func (s *Service) stopLearning() {
	l := &s.learner
	l.mu.Lock()
	l.cancel()
	if l.wake != nil {
		l.wake.Stop()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// learnFrom learns from one claimed run and records what it did, in an agentmesh.memory.learn
// span of the run's trace (the job's trace context). When that fails (storage, or the service
// closing) the claim is released and the run stays queued; facts stored by then are
// recognised as duplicates the next time.
func (s *Service) learnFrom(ctx context.Context, job LearnJob) (err error) {
	ctx, cancel := context.WithTimeout(ctx, LearnTimeout)
	defer cancel()
	ctx = telemetry.WithTraceContext(ctx, job.Traceparent, job.Tracestate)
	ctx, span := s.tracer.Start(ctx, "agentmesh.memory.learn", trace.WithAttributes(
		telemetry.RunIDKey.String(job.RunID), attrLearnAttempt.Int(job.Attempts)))
	defer func() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(semconv.ErrorTypeKey.String(learnErrorType(err)))
		}
		span.End()
	}()
	learned, err := s.learn(ctx, job)
	if err == nil {
		err = s.store.FinishLearning(ctx, job.RunID, learned)
		if errors.Is(err, ErrNotFound) {
			// Forgotten while learned from (the in-memory store's retention): there is nothing
			// to record it on, and the runs queued behind it still wait.
			return nil
		}
	}
	if err != nil {
		return errors.Join(fmt.Errorf("run %s: %w", job.RunID, err), s.store.ReleaseLearning(context.WithoutCancel(ctx), job.RunID))
	}
	if learned != nil {
		s.log.InfoContext(ctx, "learned from a finished run", "run_id", job.RunID, "user_id", job.UserID,
			"method", learned.GetMethod().String(), "stored", len(learned.GetMemoryIds()), "duplicates", len(learned.GetDuplicateOf()),
			"fallback_reason", learned.GetFallbackReason(), "error", learned.GetError())
	}
	return nil
}

// learnErrorType names why learning from a run failed, for its span's error.type: "canceled"
// (the service closing), "timeout" (LearnTimeout), a stage failure's code, else "_OTHER" (a
// storage failure).
func learnErrorType(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case stageerr.As(err) != nil:
		return stageerr.CodeName(stageerr.As(err).Code)
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// learn picks the facts of a run and stores the new ones in its user's memory. It returns what
// it did, nil when there is nothing to show (no fact, no request, no problem).
func (s *Service) learn(ctx context.Context, job LearnJob) (*typev1.RunLearning, error) {
	if job.Attempts > MaxLearnAttempts {
		return &typev1.RunLearning{Error: fmt.Sprintf("given up: learning from the run was cut off %d times", MaxLearnAttempts)}, nil
	}
	if checkUser(job.UserID) != nil {
		return nil, nil
	}
	result, _, err := s.store.GetRun(ctx, job.RunID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	learned := &typev1.RunLearning{}
	facts := s.pickFacts(ctx, job.RunID, result, learned)
	if err := ctx.Err(); err != nil { // closing, or out of time: learn again later
		return nil, err
	}
	if err := s.remember(ctx, job, usable(facts), learned); err != nil {
		return nil, err
	}
	if proto.Equal(learned, &typev1.RunLearning{Method: learned.GetMethod()}) {
		return nil, nil
	}
	return learned, nil
}

// usable are the facts worth storing: trimmed, at most MaxFactBytes each, with at least one
// searchable word and no credentials or payment details (secret: the model is told to leave
// them out, but is not trusted to), importance within [0, 1], at most MaxFactsPerRun.
func usable(facts []fact) []fact {
	var out []fact
	for _, f := range facts {
		text := clip(strings.TrimSpace(f.text), MaxFactBytes)
		if len(terms(text)) == 0 || secret.MatchString(text) || len(out) == MaxFactsPerRun {
			continue
		}
		importance := f.importance
		if math.IsNaN(importance) {
			importance = 0
		}
		out = append(out, fact{text: text, importance: min(max(importance, 0), 1)})
	}
	return out
}

// remember stores the facts in the user's personal memory, with their embeddings when an
// embedder is configured, except those the memory already holds (DuplicateMemory), and notes
// in learned what it stored, what it found, the embedding request, and a full memory.
func (s *Service) remember(ctx context.Context, job LearnJob, facts []fact, learned *typev1.RunLearning) error {
	if len(facts) == 0 {
		return nil
	}
	vectors := s.embedFacts(ctx, job, facts, learned)
	by := "rules"
	if learned.GetMethod() == typev1.LearningMethod_LEARNING_METHOD_MODEL {
		by = "model"
	}
	for i, f := range facts {
		vector := vectors[i]
		dup, err := s.store.DuplicateMemory(ctx, SearchQuery{UserID: job.UserID, Query: f.text, Vector: vector}, DuplicateSimilarity)
		if err != nil {
			return err
		}
		if dup != "" {
			learned.DuplicateOf = append(learned.DuplicateOf, dup)
			continue
		}
		m, err := s.learnedMemory(job, f, by)
		if err != nil {
			return err
		}
		err = s.store.PutMemory(ctx, m, vector, s.quota)
		s.wrote(job.UserID)
		if err != nil {
			if errors.Is(err, ErrQuotaExceeded) {
				learned.Error = fmt.Sprintf("MEMORY_FULL: user %q holds %d memories, its quota", job.UserID, s.quota)
				return nil
			}
			return err
		}
		learned.MemoryIds = append(learned.MemoryIds, m.GetId())
	}
	return nil
}

// embedFacts embeds the facts in one request, accounted in learned; without an embedder, or
// when embedding fails (logged), every vector is nil and duplicates are found by their words.
func (s *Service) embedFacts(ctx context.Context, job LearnJob, facts []fact, learned *typev1.RunLearning) [][]float32 {
	vectors := make([][]float32, len(facts))
	if s.embedder == nil {
		return vectors
	}
	texts := make([]string, len(facts))
	for i, f := range facts {
		texts[i] = f.text
	}
	embedded, entry, err := s.embedder.Embed(ctx, texts)
	if entry != nil {
		learned.Accounting = append(learned.Accounting, entry)
	}
	if err == nil && len(embedded) != len(texts) {
		err = fmt.Errorf("%d vectors for %d facts", len(embedded), len(texts))
	}
	if err != nil {
		s.log.WarnContext(ctx, "embedding learned facts failed, storing them without vectors: semantic search will find them by their words only",
			"run_id", job.RunID, "user_id", job.UserID, "error", err)
		return vectors
	}
	for i, v := range embedded {
		if at, bad := notFinite(v); bad {
			s.log.WarnContext(ctx, "embedding a learned fact failed, storing it without a "+
				"vector: semantic search will find it by its words only", "run_id", job.RunID,
				"user_id", job.UserID,
				"error", fmt.Sprintf("value %d of its vector is %v", at, v[at]))
			continue
		}
		vectors[i] = v
	}
	return vectors
}

// learnedMemory is the memory of a fact learned from a run.
func (s *Service) learnedMemory(job LearnJob, f fact, by string) (*memoryv1.Memory, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new memory id: %w", err)
	}
	meta, err := structpb.NewStruct(map[string]any{MetaRunID: job.RunID, MetaLearnedBy: by})
	if err != nil {
		return nil, err
	}
	return &memoryv1.Memory{
		Id:         id.String(),
		UserId:     job.UserID,
		Content:    f.text,
		Metadata:   meta,
		CreatedAt:  timestamppb.New(s.now()),
		Importance: f.importance,
	}, nil
}

package memory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
)

// claimCandidates is how many queued runs one ClaimLearning tries to claim, in queue order,
// before it reports none: others may claim them at the same time.
const claimCandidates = 8

// DuplicateMemory returns the memory of the user's collection that holds what q.Query says,
// among the memories sharing a term with it and, with q.Vector, those with a vector.
func (s *SQLStore) DuplicateMemory(ctx context.Context, q SearchQuery, minCosine float64) (string, error) {
	docs := make(map[string]*rankDoc)
	if err := s.lexicalCandidates(ctx, q, queryTerms(q.Query), docs); err != nil {
		return "", err
	}
	if q.Vector != nil {
		if err := s.semanticCandidates(ctx, q, docs); err != nil {
			return "", err
		}
	}
	candidates := make([]rankDoc, 0, len(docs))
	for _, d := range docs {
		candidates = append(candidates, *d)
	}
	return duplicate(q, minCosine, candidates), nil
}

// ClaimLearning claims the earliest queued run whose claim ended by now. Each claim is one
// conditional update, so replicas sharing the database never claim the same run at once.
func (s *SQLStore) ClaimLearning(ctx context.Context, now time.Time, lease time.Duration) (LearnJob, bool, error) {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT run_id FROM learning WHERE learned_at = 0 AND claimed_until <= ?
ORDER BY queued_at, run_id LIMIT ?`), now.UnixNano(), claimCandidates)
	if err != nil {
		return LearnJob{}, false, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return LearnJob{}, false, err
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return LearnJob{}, false, err
	}
	for _, id := range ids {
		job := LearnJob{RunID: id}
		err := s.db.QueryRowContext(ctx, s.d.rebind(`UPDATE learning SET claimed_until = ?, attempts = attempts + 1
WHERE run_id = ? AND learned_at = 0 AND claimed_until <= ? RETURNING user_id, attempts, traceparent, tracestate`),
			now.Add(lease).UnixNano(), id, now.UnixNano()).Scan(&job.UserID, &job.Attempts, &job.Traceparent, &job.Tracestate)
		switch {
		case err == nil:
			return job, true, nil
		case !errors.Is(err, sql.ErrNoRows): // claimed by another in the meantime: try the next
			return LearnJob{}, false, err
		}
	}
	return LearnJob{}, false, nil
}

// NextClaimEnd returns the earliest end, after now, of a claim on a queued run.
func (s *SQLStore) NextClaimEnd(ctx context.Context, now time.Time) (time.Time, bool, error) {
	var end sql.NullInt64
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT MIN(claimed_until) FROM learning WHERE learned_at = 0 AND claimed_until > ?`),
		now.UnixNano()).Scan(&end)
	if err != nil || !end.Valid {
		return time.Time{}, false, err
	}
	return time.Unix(0, end.Int64), true, nil
}

// FinishLearning records the run's learning and takes it off the queue.
func (s *SQLStore) FinishLearning(ctx context.Context, runID string, learned *typev1.RunLearning) error {
	var raw any // NULL for nil
	if learned != nil {
		b, err := proto.Marshal(learned)
		if err != nil {
			return fmt.Errorf("encode the learning of run %s: %w", runID, err)
		}
		raw = b
	}
	res, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE learning SET learned_at = ?, learned = ? WHERE run_id = ?`),
		max(time.Now().UnixNano(), 1), raw, runID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return ErrNotFound
	}
	return nil
}

// ReleaseLearning ends the claim on the run.
func (s *SQLStore) ReleaseLearning(ctx context.Context, runID string) error {
	_, err := s.db.ExecContext(ctx, s.d.rebind(`UPDATE learning SET claimed_until = 0 WHERE run_id = ? AND learned_at = 0`), runID)
	return err
}

// learned returns the recorded learning of a run; nil when there is none (yet).
func (s *SQLStore) learned(ctx context.Context, runID string) (*typev1.RunLearning, error) {
	var raw []byte
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT learned FROM learning WHERE run_id = ? AND learned IS NOT NULL`), runID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	learned := &typev1.RunLearning{}
	if err := proto.Unmarshal(raw, learned); err != nil {
		return nil, fmt.Errorf("decode the learning of run %s: %w", runID, err)
	}
	return learned, nil
}

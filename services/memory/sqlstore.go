package memory

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"google.golang.org/protobuf/proto"
)

// SQLStore is a Store in a SQL database: SQLite (OpenSQLite) or PostgreSQL (OpenPostgres).
// It is safe for concurrent use; Close releases the database.
//
// Memories are kept as protobuf bytes next to the columns queries need, with an inverted
// index of their terms (memory_terms) so a lexical search reads only the memories sharing a
// word with the query, and their vectors for semantic search. A per-user counter row
// (memory_users) makes the quota check and the insert one atomic step.
type SQLStore struct {
	db      *sql.DB
	d       dialect
	health  *dbHealth // nil for a database that is a local file
	reindex reindexer
	// ready is set once the schema is made and its indexes built (schemaReady): the
	// reindexer passes only from then on.
	ready atomic.Bool
	// indexWaitWarning is how long a concurrent index build of a PostgreSQL store waits for
	// other sessions' transactions before the store warns which, and how often it warns again
	// (WithIndexWaitWarning).
	indexWaitWarning time.Duration
}

var _ Store = (*SQLStore)(nil)

// openSQL wraps db, creates the schema when it does not exist, and starts re-indexing the
// memories an earlier release indexed (ReindexTerms), at once and every o.reindexInterval.
func openSQL(ctx context.Context, db *sql.DB, d dialect, o storeOptions) (*SQLStore, error) {
	s := &SQLStore{db: db, d: d, reindex: newReindexer()}
	if err := s.createSchema(ctx); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	s.startReindexing(o.reindexInterval)
	return s, nil
}

// createSchema creates the schema when it does not exist, and the columns and indexes it
// lacks; the store is ready once it succeeds (schemaReady). On PostgreSQL it is the prober's
// (dbHealth) setup, whose schema transaction schemaTimeout bounds, and builds the indexes of
// tables that exist already concurrently (upgradePostgres).
func (s *SQLStore) createSchema(ctx context.Context) error {
	var err error
	if s.d.concurrentIndexes {
		err = s.upgradePostgres(ctx, schemaTimeout)
	} else {
		// SQLite builds no index concurrently: every index is made in the schema transaction,
		// under the database's write lock, which other writes wait for as for any write.
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			_, err := s.migrate(ctx, tx)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("create the %s memory schema: %w", s.d.name, err)
	}
	s.schemaReady()
	return nil
}

// schemaReady records that the schema is made, its indexes built, and asks for a pass of
// ReindexTerms over the memories an earlier release indexed: the reindexer passes only from
// then on, as the memories it reads are found by an index (memories_terms_version).
func (s *SQLStore) schemaReady() {
	s.ready.Store(true)
	s.reindexSoon()
}

// migrate creates, in tx, the tables that do not exist, the columns they lack (addColumns) and
// their indexes, and records the terms version. On PostgreSQL (dialect.concurrentIndexes) it
// makes only the indexes of the tables it creates, which no other session writes yet, and
// returns those of the tables that existed, for upgradePostgres to build concurrently: even an
// index that exists would lock its table against writes until the transaction ends
// (PostgreSQL takes the table's SHARE lock before it sees the index is there).
func (s *SQLStore) migrate(ctx context.Context, tx *sql.Tx) (later []index, err error) {
	var existed map[string]bool
	if s.d.concurrentIndexes {
		if existed, err = postgresTables(ctx, tx); err != nil {
			return nil, err
		}
	}
	for _, stmt := range s.d.schema() {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return nil, err
		}
	}
	if err := s.addColumns(ctx, tx); err != nil {
		return nil, err
	}
	for _, ix := range indexes {
		if existed[ix.table] {
			later = append(later, ix)
			continue
		}
		if _, err := tx.ExecContext(ctx, ix.create(false)); err != nil {
			return nil, fmt.Errorf("create index %s: %w", ix.name, err)
		}
	}
	return later, s.recordTermsVersion(ctx, tx)
}

// addColumns adds the addedColumns a table lacks, made by an earlier release.
func (s *SQLStore) addColumns(ctx context.Context, tx *sql.Tx) error {
	have := make(map[string]map[string]bool)
	for _, c := range addedColumns {
		if have[c.table] == nil {
			names, err := s.columns(ctx, tx, c.table)
			if err != nil {
				return err
			}
			have[c.table] = names
		}
		if have[c.table][c.name] {
			continue
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", c.table, c.name, c.definition)); err != nil {
			return fmt.Errorf("add column %s.%s: %w", c.table, c.name, err)
		}
		have[c.table][c.name] = true
	}
	return nil
}

// columns returns the names of the columns of table.
func (s *SQLStore) columns(ctx context.Context, tx *sql.Tx, table string) (map[string]bool, error) {
	return queryNames(ctx, tx, s.d.rebind(s.d.columns), table)
}

// queryNames returns the set of names that query (with args), of one text column, reads.
func queryNames(ctx context.Context, tx *sql.Tx, query string, args ...any) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names := make(map[string]bool)
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names[name] = true
	}
	return names, rows.Err()
}

// Close stops re-indexing and closes the database.
func (s *SQLStore) Close() error {
	s.reindex.stop()
	if s.health != nil {
		s.health.close()
	}
	return s.db.Close()
}

// Serving reports whether the store can be used, and returns a channel that is closed when
// that may have changed (nil when it never changes): a PostgreSQL store while its database
// answers, asked every PingInterval from the first call until Close; a SQLite store, a local
// file, always.
func (s *SQLStore) Serving() (bool, <-chan struct{}) {
	if s.health == nil {
		return true, nil
	}
	return s.health.serving()
}

// Failed returns a channel that yields the error that stops the store for good, while it is
// open: the *IndexError of a PostgreSQL schema upgrade whose unique index the stored rows break,
// built after the store opened (OpenPostgres). The store is not Serving from then on. Nil for a
// SQLite store, whose open fails instead.
func (s *SQLStore) Failed() <-chan error {
	if s.health == nil {
		return nil
	}
	return s.health.failed
}

// txBeginner begins transactions: the store's database, or one connection of it (*sql.Conn).
type txBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// inTx runs fn in a transaction of the store's database, committing when it returns nil.
func (s *SQLStore) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	return inTxOf(ctx, s.db, fn)
}

// inTxOf runs fn in a transaction of db, committing when it returns nil.
func inTxOf(ctx context.Context, db txBeginner, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return errors.Join(err, rbErr)
		}
		return err
	}
	return tx.Commit()
}

// PutMemory stores m and its vector unless its user already holds quota memories; a chunk
// of a document replaces the user's memory with the same documentKey, in the same
// transaction.
func (s *SQLStore) PutMemory(ctx context.Context, m *memoryv1.Memory, vector []float32, quota int) error {
	if quota < 1 {
		return ErrQuotaExceeded
	}
	row, err := newMemoryRow(m, vector)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if row.name != "" && s.d.documentNameLock != "" {
			_, err := tx.ExecContext(ctx, s.d.rebind(s.d.documentNameLock), row.name)
			if err != nil {
				return err
			}
		}
		replaced, err := s.replaceDocument(ctx, tx, m.GetUserId(), row.key)
		if err != nil {
			return err
		}
		if !replaced {
			// One statement counts the memory and checks the quota: the update's condition
			// fails, returning no row, when the user is at the quota.
			var count int64
			err := tx.QueryRowContext(ctx, s.d.rebind(`INSERT INTO memory_users (user_id, memories)
VALUES (?, 1) ON CONFLICT (user_id) DO UPDATE SET memories = memory_users.memories + 1
WHERE memory_users.memories < ? RETURNING memories`), m.GetUserId(), quota).Scan(&count)
			if errors.Is(err, sql.ErrNoRows) {
				return ErrQuotaExceeded
			}
			if err != nil {
				return err
			}
		}
		return s.insertMemory(ctx, tx, row)
	})
}

// memoryRow is a memory as a row of memories holds it, with its terms.
type memoryRow struct {
	m         *memoryv1.Memory
	vector    []float32
	body      []byte
	freq      map[string]int
	length    int
	key, name string // documentKey and DocumentName of m
}

// newMemoryRow encodes m and its vector as a row.
func newMemoryRow(m *memoryv1.Memory, vector []float32) (memoryRow, error) {
	body, err := proto.Marshal(m)
	if err != nil {
		return memoryRow{}, fmt.Errorf("encode memory: %w", err)
	}
	freq, length := termFrequencies(m.GetContent())
	return memoryRow{m: m, vector: vector, body: body, freq: freq, length: length,
		key: documentKey(m), name: DocumentName(m)}, nil
}

// insertMemory inserts the row and its terms.
func (s *SQLStore) insertMemory(ctx context.Context, tx *sql.Tx, r memoryRow) error {
	m := r.m
	if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO memories
(id, user_id, collection, created_at, length, vector, body, document_key, document, terms_version)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		m.GetId(), m.GetUserId(), m.GetCollection(), m.GetCreatedAt().AsTime().UnixNano(),
		r.length, encodeVector(r.vector), r.body, nullable(r.key), nullable(r.name),
		termsVersion); err != nil {
		return err
	}
	return s.insertTerms(ctx, tx, m, r.freq)
}

// nullable is the column value of s: NULL for "" (a memory of no document).
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// PutDocument replaces the user's chunks of the document, and the memories with the
// documentKey of one of its chunks (stored before the document column was, or by a replica of
// an earlier release), with its chunks, in one transaction: on PostgreSQL under the
// document's advisory lock (documentNameLock), which a PutMemory of one of its chunks takes
// too, on SQLite under the database's write lock (BEGIN IMMEDIATE), so that the PutDocuments
// of one document replace its chunks one after the other.
func (s *SQLStore) PutDocument(ctx context.Context, doc Document, quota int) ([]string, error) {
	rows := make([]memoryRow, len(doc.Chunks))
	for i, m := range doc.Chunks {
		var err error
		if rows[i], err = newMemoryRow(m, doc.vector(i)); err != nil {
			return nil, err
		}
	}
	var replaced []string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if s.d.documentNameLock != "" {
			_, err := tx.ExecContext(ctx, s.d.rebind(s.d.documentNameLock), doc.Name)
			if err != nil {
				return err
			}
		}
		var err error
		replaced, err = s.deleteMemories(ctx, tx, `user_id = ? AND document = ?`,
			doc.UserID, doc.Name)
		if err != nil {
			return err
		}
		for _, r := range rows {
			ids, err := s.deleteMemories(ctx, tx, `user_id = ? AND document_key = ?`,
				doc.UserID, r.key)
			if err != nil {
				return err
			}
			replaced = append(replaced, ids...)
		}
		if err := s.countMemories(ctx, tx, doc.UserID, len(rows)-len(replaced), quota); err != nil {
			return err
		}
		for _, r := range rows {
			if err := s.insertMemory(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(replaced)
	return replaced, nil
}

// countMemories adds added (negative: takes off) to the user's count of memories, unless that
// makes more than quota: then it returns ErrQuotaExceeded.
func (s *SQLStore) countMemories(ctx context.Context, tx *sql.Tx, userID string,
	added, quota int) error {
	switch {
	case added < 0:
		_, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE memory_users SET memories = memories + ?
WHERE user_id = ?`), added, userID)
		return err
	case added == 0:
		return nil
	case added > quota: // a user without a row holds no memory
		return ErrQuotaExceeded
	}
	var count int64
	err := tx.QueryRowContext(ctx, s.d.rebind(`INSERT INTO memory_users (user_id, memories)
VALUES (?, ?) ON CONFLICT (user_id)
DO UPDATE SET memories = memory_users.memories + excluded.memories
WHERE memory_users.memories + excluded.memories <= ? RETURNING memories`),
		userID, added, quota).Scan(&count)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrQuotaExceeded
	}
	return err
}

// replaceDocument deletes the user's memory with the documentKey key, and its terms, and
// reports whether there was one (its place in the quota is the new memory's). A key of ""
// deletes nothing.
func (s *SQLStore) replaceDocument(ctx context.Context, tx *sql.Tx,
	userID, key string) (bool, error) {
	if key == "" {
		return false, nil
	}
	if s.d.documentLock != "" {
		if _, err := tx.ExecContext(ctx, s.d.rebind(s.d.documentLock), key); err != nil {
			return false, err
		}
	}
	ids, err := s.deleteMemories(ctx, tx, `user_id = ? AND document_key = ?`, userID, key)
	return len(ids) > 0, err
}

// deleteMemories deletes the memories where the condition holds, and their terms, and returns
// their ids.
func (s *SQLStore) deleteMemories(ctx context.Context, tx *sql.Tx, where string,
	args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx,
		s.d.rebind(`DELETE FROM memories WHERE `+where+` RETURNING id`), args...)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, errors.Join(err, rows.Close())
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	for batch := range slices.Chunk(ids, queryTermBatch) {
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM memory_terms WHERE memory_id IN (`+
			placeholders(len(batch))+`)`), args...); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// termBatch is the number of term rows inserted by one statement.
const termBatch = 200

// insertTerms indexes the terms of m.
func (s *SQLStore) insertTerms(ctx context.Context, tx *sql.Tx, m *memoryv1.Memory, freq map[string]int) error {
	for batch := range slices.Chunk(slices.Sorted(maps.Keys(freq)), termBatch) {
		args := make([]any, 0, 5*len(batch))
		for _, t := range batch {
			args = append(args, m.GetUserId(), m.GetCollection(), t, m.GetId(), freq[t])
		}
		query := "INSERT INTO memory_terms (user_id, collection, term, memory_id, tf) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?), ", len(batch)), ", ")
		if _, err := tx.ExecContext(ctx, s.d.rebind(query), args...); err != nil {
			return err
		}
	}
	return nil
}

// SearchMemories ranks the user's memories in the collection. It reads the collection's size,
// the memories holding a query term (through the term index) and, for a semantic search, the
// vectors of the collection; then it ranks them and reads the hits.
func (s *SQLStore) SearchMemories(ctx context.Context, q SearchQuery) ([]*memoryv1.MemoryHit, error) {
	var c corpus
	if err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT COUNT(*), COALESCE(SUM(length), 0) FROM memories
WHERE user_id = ? AND collection = ?`), q.UserID, q.Collection).Scan(&c.docs, &c.totalLength); err != nil {
		return nil, err
	}
	if c.docs == 0 {
		return nil, nil
	}
	qterms := queryTerms(q.Query)
	docs := make(map[string]*rankDoc)
	if err := s.lexicalCandidates(ctx, q, qterms, docs); err != nil {
		return nil, err
	}
	if q.Vector != nil {
		if err := s.semanticCandidates(ctx, q, docs); err != nil {
			return nil, err
		}
	}
	candidates := make([]rankDoc, 0, len(docs))
	for _, d := range docs {
		candidates = append(candidates, *d)
	}
	ranked := rank(q, qterms, c, candidates)
	return s.hits(ctx, q.UserID, ranked)
}

// queryTermBatch is the number of query terms one statement of lexicalCandidates looks up,
// well within the parameters a statement takes (SQLite 32,766, PostgreSQL 65,535).
const queryTermBatch = 1000

// lexicalCandidates adds to docs the memories holding one of qterms, with their frequencies,
// looking the terms up queryTermBatch at a time.
func (s *SQLStore) lexicalCandidates(ctx context.Context, q SearchQuery, qterms []string, docs map[string]*rankDoc) error {
	for batch := range slices.Chunk(qterms, queryTermBatch) {
		if err := s.lexicalBatch(ctx, q, batch, docs); err != nil {
			return err
		}
	}
	return nil
}

// lexicalBatch adds to docs the memories holding one of qterms, with their frequencies.
func (s *SQLStore) lexicalBatch(ctx context.Context, q SearchQuery, qterms []string, docs map[string]*rankDoc) error {
	args := []any{q.UserID, q.Collection}
	for _, t := range qterms {
		args = append(args, t)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT t.memory_id, t.term, t.tf, m.length, m.created_at
FROM memory_terms t JOIN memories m ON m.id = t.memory_id
WHERE t.user_id = ? AND t.collection = ? AND t.term IN (`+placeholders(len(qterms))+`)`), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, term string
		var tf, length int
		var created int64
		if err := rows.Scan(&id, &term, &tf, &length, &created); err != nil {
			return err
		}
		d := docs[id]
		if d == nil {
			d = &rankDoc{id: id, createdAt: created, length: length, freq: make(map[string]int)}
			docs[id] = d
		}
		d.freq[term] = tf
	}
	return rows.Err()
}

// semanticCandidates adds to docs every memory of the collection that has a vector.
func (s *SQLStore) semanticCandidates(ctx context.Context, q SearchQuery, docs map[string]*rankDoc) error {
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT id, length, created_at, vector FROM memories
WHERE user_id = ? AND collection = ? AND vector IS NOT NULL`), q.UserID, q.Collection)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var length int
		var created int64
		var raw []byte
		if err := rows.Scan(&id, &length, &created, &raw); err != nil {
			return err
		}
		vector, err := decodeVector(raw)
		if err != nil {
			return fmt.Errorf("memory %s: %w", id, err)
		}
		d := docs[id]
		if d == nil {
			d = &rankDoc{id: id, createdAt: created, length: length}
			docs[id] = d
		}
		d.vector = vector
	}
	return rows.Err()
}

// hits reads the ranked memories of userID, in rank order.
func (s *SQLStore) hits(ctx context.Context, userID string, ranked []rankedDoc) ([]*memoryv1.MemoryHit, error) {
	if len(ranked) == 0 {
		return nil, nil
	}
	args := []any{userID}
	for _, r := range ranked {
		args = append(args, r.id)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT id, body FROM memories WHERE user_id = ? AND id IN (`+placeholders(len(ranked))+`)`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byID := make(map[string]*memoryv1.Memory, len(ranked))
	for rows.Next() {
		var id string
		var body []byte
		if err := rows.Scan(&id, &body); err != nil {
			return nil, err
		}
		m := &memoryv1.Memory{}
		if err := proto.Unmarshal(body, m); err != nil {
			return nil, fmt.Errorf("decode memory %s: %w", id, err)
		}
		byID[id] = m
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	hits := make([]*memoryv1.MemoryHit, 0, len(ranked))
	for _, r := range ranked {
		// A memory deleted since it was ranked is left out.
		if m := byID[r.id]; m != nil {
			hits = append(hits, &memoryv1.MemoryHit{Memory: m, RelevanceScore: r.score})
		}
	}
	return hits, nil
}

// ListMemories pages through the user's memories in the collection, newest first.
func (s *SQLStore) ListMemories(ctx context.Context, q ListQuery) ([]*memoryv1.Memory, error) {
	query := `SELECT body FROM memories WHERE user_id = ? AND collection = ?`
	args := []any{q.UserID, q.Collection}
	if q.After != nil {
		at := q.After.CreatedAt.UnixNano()
		query += ` AND (created_at < ? OR (created_at = ? AND id < ?))`
		args = append(args, at, at, q.After.ID)
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, q.Limit)
	rows, err := s.db.QueryContext(ctx, s.d.rebind(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []*memoryv1.Memory
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		m := &memoryv1.Memory{}
		if err := proto.Unmarshal(body, m); err != nil {
			return nil, fmt.Errorf("decode memory: %w", err)
		}
		page = append(page, m)
	}
	return page, rows.Err()
}

// DeleteMemory deletes the user's memory id, its terms, and counts it off the user's quota.
func (s *SQLStore) DeleteMemory(ctx context.Context, userID, id string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM memories WHERE id = ? AND user_id = ?`), id, userID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM memory_terms WHERE memory_id = ?`), id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.d.rebind(`UPDATE memory_users SET memories = memories - 1 WHERE user_id = ?`), userID)
		return err
	})
}

// AppendTranscript appends entries that continue the run's stored chain, checked in the same
// transaction as the insert.
func (s *SQLStore) AppendTranscript(ctx context.Context, runID string, entries []*typev1.TranscriptEntry) (int64, error) {
	var length int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if s.d.runLock != "" {
			if _, err := tx.ExecContext(ctx, s.d.rebind(s.d.runLock), runID); err != nil {
				return err
			}
		}
		var last string
		err := tx.QueryRowContext(ctx, s.d.rebind(`SELECT seq, hash FROM transcripts WHERE run_id = ? ORDER BY seq DESC LIMIT 1`), runID).Scan(&length, &last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := VerifyAppend(length, last, entries); err != nil {
			return err
		}
		for _, e := range entries {
			raw, err := proto.Marshal(e)
			if err != nil {
				return fmt.Errorf("encode transcript entry %d: %w", e.GetSeq(), err)
			}
			if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO transcripts (run_id, seq, hash, entry) VALUES (?, ?, ?, ?)`),
				runID, e.GetSeq(), e.GetHash(), raw); err != nil {
				return err
			}
		}
		length += int64(len(entries))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return length, nil
}

// SaveRun stores the run's result without its learning, replacing an earlier save, and
// queues the run for learning the first time, with ctx's trace context, in one transaction.
func (s *SQLStore) SaveRun(ctx context.Context, userID string, result *typev1.RunResult) error {
	raw, err := encodeResult(result)
	if err != nil {
		return err
	}
	traceparent, tracestate := telemetry.TraceContextOf(ctx)
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO runs (run_id, user_id, result) VALUES (?, ?, ?)
ON CONFLICT (run_id) DO UPDATE SET user_id = excluded.user_id, result = excluded.result`), result.GetRunId(), userID, raw); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO learning (run_id, user_id, queued_at, claimed_until, attempts, learned_at, traceparent, tracestate)
VALUES (?, ?, ?, 0, 0, 0, ?, ?) ON CONFLICT (run_id) DO NOTHING`), result.GetRunId(), userID, time.Now().UnixNano(), traceparent, tracestate)
		return err
	})
}

// GetRun returns the run's result with the stored transcript, and its user.
func (s *SQLStore) GetRun(ctx context.Context, runID string) (*typev1.RunResult, string, error) {
	var (
		raw    []byte
		userID string
	)
	err := s.db.QueryRowContext(ctx, s.d.rebind(`SELECT result, user_id FROM runs WHERE run_id = ?`), runID).Scan(&raw, &userID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", ErrNotFound
	}
	if err != nil {
		return nil, "", err
	}
	result := &typev1.RunResult{}
	if err := proto.Unmarshal(raw, result); err != nil {
		return nil, "", fmt.Errorf("decode run %s: %w", runID, err)
	}
	rows, err := s.db.QueryContext(ctx, s.d.rebind(`SELECT entry FROM transcripts WHERE run_id = ? ORDER BY seq`), runID)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var chain []*typev1.TranscriptEntry
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, "", err
		}
		e := &typev1.TranscriptEntry{}
		if err := proto.Unmarshal(raw, e); err != nil {
			return nil, "", fmt.Errorf("decode transcript of run %s: %w", runID, err)
		}
		chain = append(chain, e)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	if len(chain) > 0 {
		result.Transcript = chain
	}
	if result.Learning, err = s.learned(ctx, runID); err != nil {
		return nil, "", err
	}
	return result, userID, nil
}

// placeholders returns n comma-separated ? placeholders.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// encodeVector returns the column value of v: little-endian float32s, or NULL for no vector.
func encodeVector(v []float32) any {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// decodeVector reverses encodeVector.
func decodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("vector of %d bytes is not a list of float32", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

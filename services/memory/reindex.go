package memory

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"time"
	"unicode"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"google.golang.org/protobuf/proto"
)

// termsVersion is the version of indexTerms that indexes memory_terms, which each memory's
// terms_version records: 1 split only at characters that are neither letters nor digits; 2
// splits the runs of scripts written without spaces into pairs of characters; 3 indexes each
// character of those runs too; 4 reads full-width letters, digits and punctuation as their
// ASCII forms. A release before the column (0) indexed as version 4 or earlier.
//
// A version that changes how text is indexed must say, with plainTermsSince and termsChanged,
// which memories it indexes as the versions before did: ReindexTerms trusts their terms.
const termsVersion = 4

// plainTermsSince is the oldest terms_version from which a memory whose text is plain (no
// character termsChanged) is indexed as termsVersion indexes it: ReindexTerms gives such a
// memory the version without reading its terms, let alone writing them. Versions 1 to 4 differ
// only on the characters termsChanged tells (splitTerms reads every other one as version 1's
// strings.FieldsFunc did: lowercase runs of letters and digits, stopwords left out), and a
// memory at 0 was indexed by one of them, so every version is covered. A version that changes
// how other text is indexed (a stopword, another split, stemming) sets plainTermsSince to
// itself, so that no memory indexed before it is plain; one that changes how other characters
// are indexed adds them to termsChanged.
const plainTermsSince = 0

// termsChanged reports whether the versions from plainTermsSince to termsVersion index the
// character r, as strings.ToLower reads it, otherwise: a character of a script written
// without spaces (unspaced: version 2 split their runs into pairs of characters, version 3
// indexes each character too) or the full-width form of an ASCII character (fullWidth: version
// 4 reads it as that character).
func termsChanged(r rune) bool { return unspaced(r) != 0 || fullWidth(r) }

// plainText reports whether text holds no character termsChanged, before or after
// strings.ToLower (which maps it rune by rune with unicode.ToLower).
func plainText(text string) bool {
	for _, r := range text {
		if termsChanged(r) || termsChanged(unicode.ToLower(r)) {
			return false
		}
	}
	return true
}

// plainShortcut is whether ReindexTerms trusts the terms of a plain memory (plainTermsSince):
// always, but in the benchmark of the pass that reads them all, its baseline.
var plainShortcut = true

// DefaultReindexInterval is how often a SQL store re-indexes the memories an earlier release
// indexed (SQLStore.ReindexTerms) when WithReindexInterval does not say: those a replica not
// yet upgraded writes during a rolling upgrade are found by the new terms within it.
const DefaultReindexInterval = 5 * time.Minute

// reindexBatchRows is the number of memories one transaction of ReindexTerms reads and
// indexes again, which bounds what it holds (their encodings and terms) and how long it holds
// SQLite's write lock.
const reindexBatchRows = 500

// StoreOption configures a SQL store (OpenSQLite, OpenPostgres).
type StoreOption func(*storeOptions)

// storeOptions is what the StoreOptions of a SQL store set.
type storeOptions struct {
	reindexInterval  time.Duration
	indexWaitWarning time.Duration // PostgreSQL's (WithIndexWaitWarning)
}

// WithReindexInterval sets how often the store re-indexes the memories an earlier release
// indexed (SQLStore.ReindexTerms), after it does so when it opens; 0 means
// DefaultReindexInterval.
func WithReindexInterval(d time.Duration) StoreOption {
	return func(o *storeOptions) { o.reindexInterval = d }
}

// newStoreOptions applies opts.
func newStoreOptions(opts []StoreOption) storeOptions {
	var o storeOptions
	for _, opt := range opts {
		opt(&o)
	}
	o.reindexInterval = cmp.Or(o.reindexInterval, DefaultReindexInterval)
	if o.indexWaitWarning <= 0 {
		o.indexWaitWarning = DefaultIndexWaitWarning
	}
	return o
}

// reindexer runs a store's ReindexTerms in the background: when its schema is created, and
// every interval, until the store closes.
type reindexer struct {
	soon   chan struct{} // a pass is due now
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has returned
}

// newReindexer returns a reindexer not started yet, which remembers a pass asked for before.
func newReindexer() reindexer { return reindexer{soon: make(chan struct{}, 1)} }

// startReindexing starts the store's reindexer, which passes at once when a pass was asked
// for (reindexSoon), and every interval, once the store's schema is ready (schemaReady).
func (s *SQLStore) startReindexing(interval time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	s.reindex.cancel, s.reindex.done = cancel, make(chan struct{})
	go func() {
		defer close(s.reindex.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.reindex.soon:
			case <-tick.C:
			}
			if !s.ready.Load() {
				continue // the schema, or an index, is still to be made: schemaReady asks again
			}
			_, err := s.ReindexTerms(ctx)
			if err == nil || ctx.Err() != nil {
				continue
			}
			// A database that does not answer says so already (dbHealth).
			if up, _ := s.Serving(); up {
				slog.Warn("re-indexing the memories an earlier release indexed failed: "+
					"tried again in "+interval.String(), "error", err)
			}
		}
	}()
}

// reindexSoon asks the reindexer for a pass now.
func (s *SQLStore) reindexSoon() {
	select {
	case s.reindex.soon <- struct{}{}:
	default: // one is due already
	}
}

// stop stops the reindexer, cutting a pass off (its batch is rolled back), and waits for it.
func (r *reindexer) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
}

// recordTermsVersion records termsVersion as the "terms" version of memory_schema, unless a
// newer release recorded a newer one: a replica of a release before the memories'
// terms_version, which indexed every memory again once when that version was below its own,
// then leaves them alone.
func (s *SQLStore) recordTermsVersion(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, s.d.rebind(`INSERT INTO memory_schema (name, version)
VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET version = excluded.version
WHERE memory_schema.version < excluded.version`), "terms", termsVersion)
	return err
}

// TermsReindex says what a ReindexTerms pass did.
type TermsReindex struct {
	// Memories is the number of memories brought to the current termsVersion.
	Memories int
	// Rewritten is the number of those whose terms changed (the others' were right already).
	Rewritten int
	// Plain is the number of those whose text is plain (plainTermsSince): they got the
	// version without their terms being read.
	Plain int
	// Batches is the number of transactions the pass took, each of at most 500 memories.
	Batches int
}

// ReindexTerms indexes again the memories whose terms_version is older than termsVersion:
// those an earlier release indexed, before this one opened the database or since (a replica
// not yet upgraded, in a rolling upgrade, sets no terms_version). It reads them in the order
// of (terms_version, id), 500 at a time, each batch in a transaction of its own (its rows
// locked on PostgreSQL, those another transaction holds left to a later pass), so that it
// holds at most a batch, however many there are; a memory whose terms are right already only
// gets the version, and so does a memory whose text is plain (plainTermsSince), whose terms are
// not even read: most memories, whose words no version since theirs indexes otherwise. A
// memory that does not decode keeps its terms, and gets the version too.
// The store runs it when its schema is created, and then every WithReindexInterval.
func (s *SQLStore) ReindexTerms(ctx context.Context) (TermsReindex, error) {
	var r TermsReindex
	after := reindexCursor{version: math.MinInt32}
	for {
		next, n, err := s.reindexBatch(ctx, after, &r)
		if err != nil {
			return r, fmt.Errorf("re-index the memories' terms: %w", err)
		}
		if n > 0 {
			r.Batches++
		}
		if n < reindexBatchRows {
			break
		}
		after = next
	}
	if r.Memories > 0 {
		slog.Info("re-indexed the memories an earlier release indexed", "memories", r.Memories,
			"rewritten", r.Rewritten, "batches", r.Batches, "terms_version", termsVersion)
	}
	return r, nil
}

// reindexCursor is the position of ReindexTerms: the terms_version and id of the last memory
// it read.
type reindexCursor struct {
	version int64
	id      string
}

// staleMemory is a memory ReindexTerms read.
type staleMemory struct {
	reindexCursor
	body []byte
}

// reindexBatch indexes again, in one transaction, the next reindexBatchRows memories after
// the cursor whose terms_version is older than termsVersion, counting them in r, and returns
// the cursor after them and how many it read.
func (s *SQLStore) reindexBatch(ctx context.Context, after reindexCursor,
	r *TermsReindex) (next reindexCursor, n int, err error) {
	var done TermsReindex
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		done = TermsReindex{}
		batch, err := s.staleMemories(ctx, tx, after)
		if err != nil {
			return err
		}
		n = len(batch)
		if n == 0 {
			return nil
		}
		next = batch[n-1].reindexCursor
		var right []any // the ids of the memories whose terms are right
		var check []decodedMemory
		for _, sm := range batch {
			m := &memoryv1.Memory{}
			if err := proto.Unmarshal(sm.body, m); err != nil {
				slog.Warn("a memory that does not decode keeps the terms an earlier release "+
					"indexed", "memory_id", sm.id, "error", err)
				right = append(right, sm.id)
				continue
			}
			if plainShortcut && sm.version >= plainTermsSince && plainText(m.GetContent()) {
				right = append(right, sm.id)
				done.Plain++
				continue
			}
			check = append(check, decodedMemory{sm.id, m})
		}
		stored, err := s.storedTerms(ctx, tx, check)
		if err != nil {
			return err
		}
		for _, dm := range check {
			freq, length := termFrequencies(dm.m.GetContent())
			if maps.Equal(freq, stored[dm.id]) {
				right = append(right, dm.id)
				continue
			}
			if _, err := tx.ExecContext(ctx, s.d.rebind(`DELETE FROM memory_terms
WHERE memory_id = ?`), dm.id); err != nil {
				return err
			}
			if err := s.insertTerms(ctx, tx, dm.m, freq); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE memories
SET length = ?, terms_version = ? WHERE id = ?`), length, termsVersion, dm.id); err != nil {
				return err
			}
			done.Rewritten++
		}
		for ids := range slices.Chunk(right, queryTermBatch) {
			if _, err := tx.ExecContext(ctx, s.d.rebind(`UPDATE memories SET terms_version = ?
WHERE id IN (`+placeholders(len(ids))+`)`), append([]any{termsVersion}, ids...)...); err != nil {
				return err
			}
		}
		done.Memories = n
		return nil
	})
	if err != nil {
		return reindexCursor{}, 0, err
	}
	r.Memories += done.Memories
	r.Rewritten += done.Rewritten
	r.Plain += done.Plain
	return next, n, nil
}

// staleMemories reads the next reindexBatchRows memories after the cursor whose terms_version
// is older than termsVersion, in the order of (terms_version, id).
func (s *SQLStore) staleMemories(ctx context.Context, tx *sql.Tx,
	after reindexCursor) ([]staleMemory, error) {
	rows, err := tx.QueryContext(ctx, s.d.rebind(`SELECT id, terms_version, body FROM memories
WHERE terms_version < ? AND (terms_version, id) > (?, ?)
ORDER BY terms_version, id LIMIT ?`+s.d.skipLocked),
		termsVersion, after.version, after.id, reindexBatchRows)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var batch []staleMemory
	for rows.Next() {
		var sm staleMemory
		if err := rows.Scan(&sm.id, &sm.version, &sm.body); err != nil {
			return nil, err
		}
		batch = append(batch, sm)
	}
	return batch, rows.Err()
}

// decodedMemory is a memory ReindexTerms read whose terms it compares: its id and the memory.
type decodedMemory struct {
	id string
	m  *memoryv1.Memory
}

// storedTerms returns the terms memory_terms holds of the memories of batch, with their
// frequencies.
func (s *SQLStore) storedTerms(ctx context.Context, tx *sql.Tx,
	batch []decodedMemory) (map[string]map[string]int, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	args := make([]any, len(batch))
	for i, dm := range batch {
		args[i] = dm.id
	}
	rows, err := tx.QueryContext(ctx, s.d.rebind(`SELECT memory_id, term, tf FROM memory_terms
WHERE memory_id IN (`+placeholders(len(args))+`)`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	terms := make(map[string]map[string]int, len(batch))
	for rows.Next() {
		var id, term string
		var tf int
		if err := rows.Scan(&id, &term, &tf); err != nil {
			return nil, err
		}
		if terms[id] == nil {
			terms[id] = make(map[string]int)
		}
		terms[id][term] = tf
	}
	return terms, rows.Err()
}

package memory

import (
	"testing"
	"time"
)

// StopReindexing stops the store's background re-indexing (ReindexTerms at start and every
// interval), so that a test counts what its own call of ReindexTerms does.
func (s *SQLStore) StopReindexing() { s.reindex.stop() }

// ReindexBatchRows is the number of memories one transaction of ReindexTerms indexes again.
const ReindexBatchRows = reindexBatchRows

// SetSchemaLockWait sets how long OpenPostgres waits for another replica's schema upgrade
// until t ends.
func SetSchemaLockWait(t *testing.T, d time.Duration) {
	was := schemaLockWait
	schemaLockWait = d
	t.Cleanup(func() { schemaLockWait = was })
}

// SetPlainShortcut sets whether ReindexTerms trusts the terms of plain memories until tb ends:
// off, it reads and compares every memory's, the baseline of its benchmark.
func SetPlainShortcut(tb testing.TB, on bool) {
	was := plainShortcut
	plainShortcut = on
	tb.Cleanup(func() { plainShortcut = was })
}

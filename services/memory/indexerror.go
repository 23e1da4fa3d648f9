package memory

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// IndexError is the failure of a PostgreSQL store's schema upgrade to build a unique index over
// the rows its table holds: some break the index's rule. No wait mends it: the store, which
// builds its indexes after it opened, is not Serving from then on and Failed yields the error,
// for the memory stage to exit with it rather than serve without the index.
//
// Its message, which the stage logs, names no value of the rows (a user id, a document key:
// user data), only how many keys are duplicated and the query that lists them, to be run by
// whoever may read the rows.
type IndexError struct {
	// Index, Table and Columns say which index: its name, its table and its columns.
	Index, Table string
	Columns      []string
	// Rule is what the index keeps.
	Rule string
	// Duplicates is how many keys (values of Columns, none NULL) more than one row of Table
	// holds; -1 when they could not be counted.
	Duplicates int64
	// Err is PostgreSQL's error. Its detail names a key that is duplicated, user data that
	// Error leaves out.
	Err error
}

// Error names the index, its table, columns and rule, says how many keys are duplicated and
// gives the query that lists them.
func (e *IndexError) Error() string {
	dups := "some keys are"
	switch {
	case e.Duplicates == 1:
		dups = "1 key is"
	case e.Duplicates > 1:
		dups = fmt.Sprintf("%d keys are", e.Duplicates)
	}
	return fmt.Sprintf("the unique index %s on %s (%s) cannot be built: rows of %s break its "+
		"rule, %s: %s held by more than one row (list them with: %s); delete the duplicates, "+
		"then start the memory stage again", e.Index, e.Table, strings.Join(e.Columns, ", "),
		e.Table, e.Rule, dups, e.DuplicatesQuery())
}

// Unwrap returns PostgreSQL's error.
func (e *IndexError) Unwrap() error { return e.Err }

// DuplicatesQuery returns the SQL query that lists the keys more than one row of the table
// holds, each with its number of rows (NULLs are distinct to a unique index: a key with one is
// no duplicate).
func (e *IndexError) DuplicatesQuery() string {
	cols := strings.Join(e.Columns, ", ")
	return fmt.Sprintf("SELECT %s, COUNT(*) FROM %s WHERE %s GROUP BY %s HAVING COUNT(*) > 1",
		cols, e.Table, strings.Join(e.Columns, " IS NOT NULL AND ")+" IS NOT NULL", cols)
}

// duplicatesCountTimeout bounds the count of the keys an index's rows duplicate: one pass over
// the table, as the build that failed made, but no failure waits for it longer.
const duplicatesCountTimeout = 10 * time.Second

// countDuplicates returns how many keys e's table holds more than once (e.DuplicatesQuery's
// rows), -1 when q cannot tell within duplicatesCountTimeout.
func countDuplicates(ctx context.Context, q queryer, e *IndexError) int64 {
	ctx, cancel := context.WithTimeout(ctx, duplicatesCountTimeout)
	defer cancel()
	var n int64
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM ("+e.DuplicatesQuery()+") AS d").
		Scan(&n); err != nil {
		slog.Warn("the keys a unique index's rows duplicate could not be counted",
			"index", e.Index, "error", err)
		return -1
	}
	return n
}

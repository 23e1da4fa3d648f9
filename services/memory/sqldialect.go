package memory

import (
	"fmt"
	"strconv"
	"strings"
)

// dialect holds what differs between the SQL databases a SQLStore runs on. Queries are
// written with ? placeholders; rebind turns them into the database's own.
type dialect struct {
	// name is the database's name in error messages.
	name string
	// key is the column type of identifiers, compared bytewise so the newest-first order
	// matches Go's string order.
	key string
	// blob is the column type of binary data.
	blob string
	// numbered placeholders ($1, $2, ...) instead of ?.
	numbered bool
	// concurrentIndexes is set for PostgreSQL, which builds an index of a table that exists
	// already with CREATE INDEX CONCURRENTLY, outside any transaction, under the schema lock of
	// a session (upgradePostgres), so that writes to the table go on while it builds. Without
	// it every index is made in the schema transaction, which the transaction itself
	// serialises (SQLite's BEGIN IMMEDIATE): SQLite builds no index concurrently, and an index
	// build holds its write lock as every write does.
	concurrentIndexes bool
	// runLock, when set, serialises appends to one run's transcript inside their
	// transaction; its only argument is the run id. Without it the transaction itself must
	// serialise writers (SQLite's BEGIN IMMEDIATE).
	runLock string
	// documentLock, when set, serialises the stores of one document chunk (its only argument
	// is the chunk's documentKey) inside their transaction, so the second finds the first's
	// row to replace. Without it the transaction itself must serialise writers.
	documentLock string
	// documentNameLock, when set, serialises the writes of one document's chunks (its only
	// argument is their DocumentName) inside their transaction, taken before documentLock:
	// the PutDocuments of one document replace its chunks one after the other, and a PutMemory
	// of one of its chunks waits for them. Without it the transaction itself must serialise
	// writers.
	documentNameLock string
	// columns lists the names of the columns of a table, its only argument.
	columns string
	// skipLocked, when set, ends the query of a batch of ReindexTerms: it locks the rows it
	// reads, leaving out those another transaction holds (a replica's batch, a write), which
	// a later pass takes. Without it the transaction itself must serialise writers.
	skipLocked string
}

var (
	sqliteDialect   = dialect{name: "sqlite", key: "TEXT", blob: "BLOB", columns: "SELECT name FROM pragma_table_info(?)"}
	postgresDialect = dialect{
		name:              "postgres",
		key:               `TEXT COLLATE "C"`,
		blob:              "BYTEA",
		numbered:          true,
		concurrentIndexes: true,
		runLock:           "SELECT pg_advisory_xact_lock(7008, hashtext(?))",
		documentLock:      "SELECT pg_advisory_xact_lock(7009, hashtext(?))",
		// Another class of keys than documentLock's, so that a document's lock is never a
		// chunk's.
		documentNameLock: "SELECT pg_advisory_xact_lock(7010, hashtext(?))",
		columns:          "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?",
		skipLocked:       " FOR UPDATE SKIP LOCKED",
	}
)

// addedColumn is a column added to a table of the schema after the table was first made:
// openSQL adds it to a database made before.
type addedColumn struct {
	table, name, definition string
}

// addedColumns are the columns added to the schema's tables since they were first made.
var addedColumns = []addedColumn{
	// The W3C trace context of a run's first save (LearnJob.Traceparent and Tracestate).
	{"learning", "traceparent", "TEXT NOT NULL DEFAULT ''"},
	{"learning", "tracestate", "TEXT NOT NULL DEFAULT ''"},
	// The documentKey of a document's chunk, NULL for other memories and for those stored
	// before the column was added (duplicates an earlier release stored among them stay
	// until their document is ingested again, which deletes its earlier chunks).
	{"memories", "document_key", "TEXT"},
	// The DocumentName of a document's chunk, NULL for other memories and for those stored
	// before the column was added (an ingestion of their file deletes them as it did before).
	{"memories", "document", "TEXT"},
	// The termsVersion that indexed the memory's terms. A release before the column does not
	// set it: the rows it wrote, before the column was added or after (a replica not yet
	// upgraded, during a rolling upgrade), are at 0, older than every version, and
	// ReindexTerms indexes them again.
	{"memories", "terms_version", "INTEGER NOT NULL DEFAULT 0"},
}

// index is an index of the schema.
type index struct {
	name, table string
	unique      bool
	// on is what follows the table's name: the columns, and the WHERE clause of a partial
	// index; a unique index's is its columns alone (columns).
	on string
	// rule is what a unique index keeps, which an IndexError names when the rows stored break
	// it.
	rule string
}

// columns returns the columns of a unique index, whose on is their list alone, in
// parentheses (no expression, no WHERE clause).
func (ix index) columns() []string {
	return strings.Split(strings.Trim(ix.on, "()"), ", ")
}

// create returns the statement that makes ix when no index of its name exists: with
// concurrently, PostgreSQL's CREATE INDEX CONCURRENTLY, which only runs outside a transaction.
func (ix index) create(concurrently bool) string {
	var b strings.Builder
	b.WriteString("CREATE ")
	if ix.unique {
		b.WriteString("UNIQUE ")
	}
	b.WriteString("INDEX ")
	if concurrently {
		b.WriteString("CONCURRENTLY ")
	}
	b.WriteString("IF NOT EXISTS " + ix.name + " ON " + ix.table + " " + ix.on)
	return b.String()
}

// indexes are the schema's indexes, made once their tables and columns (addedColumns) are
// there: in the schema transaction when their table is made by it (on SQLite, always), else
// concurrently after it (dialect.concurrentIndexes).
var indexes = []index{
	{name: "memories_newest", table: "memories", on: "(user_id, collection, created_at DESC, id DESC)"},
	{name: "memory_terms_memory", table: "memory_terms", on: "(memory_id)"},
	// The runs queued for learning.
	{name: "learning_queue", table: "learning", on: "(queued_at, run_id) WHERE learned_at = 0"},
	// The indexes on addedColumns, which a database made before lacks.
	//
	// One memory of a user per document chunk (NULLs are distinct: other memories are free).
	{name: "memories_document", table: "memories", unique: true, on: "(user_id, document_key)",
		rule: "one memory of a user per document chunk"},
	// The chunks of a user's document, which PutDocument replaces.
	{name: "memories_of_document", table: "memories", on: "(user_id, document)"},
	// The memories ReindexTerms reads, in its order: none at all, most of the time.
	{name: "memories_terms_version", table: "memories", on: "(terms_version, id)"},
}

// rebind returns query with the dialect's placeholders.
func (d dialect) rebind(query string) string {
	if !d.numbered {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// schema returns the statements that create the store's tables when they do not exist (their
// indexes are indexes).
func (d dialect) schema() []string {
	return []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS memories (
	id %[1]s PRIMARY KEY,
	user_id %[1]s NOT NULL,
	collection %[1]s NOT NULL,
	created_at BIGINT NOT NULL,
	length INTEGER NOT NULL,
	vector %[2]s,
	body %[2]s NOT NULL
)`, d.key, d.blob),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS memory_terms (
	user_id %[1]s NOT NULL,
	collection %[1]s NOT NULL,
	term %[1]s NOT NULL,
	memory_id %[1]s NOT NULL,
	tf INTEGER NOT NULL,
	PRIMARY KEY (user_id, collection, term, memory_id)
)`, d.key),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS memory_users (
	user_id %s PRIMARY KEY,
	memories BIGINT NOT NULL
)`, d.key),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS transcripts (
	run_id %[1]s NOT NULL,
	seq BIGINT NOT NULL,
	hash TEXT NOT NULL,
	entry %[2]s NOT NULL,
	PRIMARY KEY (run_id, seq)
)`, d.key, d.blob),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS runs (
	run_id %[1]s PRIMARY KEY,
	user_id %[1]s NOT NULL,
	result %[2]s NOT NULL
)`, d.key, d.blob),
		// One row per saved run: queued for learning while learned_at is 0, then what learning
		// did (learned, NULL when nothing worth showing). Times are Unix nanoseconds. Its
		// trace context columns are addedColumns.
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS learning (
	run_id %[1]s PRIMARY KEY,
	user_id %[1]s NOT NULL,
	queued_at BIGINT NOT NULL,
	claimed_until BIGINT NOT NULL,
	attempts INTEGER NOT NULL,
	learned_at BIGINT NOT NULL,
	learned %[2]s
)`, d.key, d.blob),
		// Versions of what the schema's data was made by. The releases before the memories'
		// terms_version indexed every memory again, once, in one transaction, when the row
		// "terms" was below their termsVersion (no row: 1); recordTermsVersion keeps it at
		// the newest version, so that they do not.
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS memory_schema (
	name %s PRIMARY KEY,
	version BIGINT NOT NULL
)`, d.key),
	}
}

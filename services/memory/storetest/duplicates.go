package storetest

import (
	"context"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// DuplicatedUser and DuplicatedKey are the user and the document key of the memories that
// PostgresWithDuplicates stores twice: user data, which no log may show.
const (
	DuplicatedUser = "alice-7f3a"
	DuplicatedKey  = "chunk-key-9c1e"
)

// PostgresWithDuplicates returns the DSN of a new schema (PostgresDSN) holding the memory
// store's tables as a release before the unique index memories_document left them: without
// it, and with two memories of DuplicatedUser with the document key DuplicatedKey, which break
// its rule. A store opening it cannot build the index: it fails (SQLStore.Failed) with a
// *memory.IndexError.
func PostgresWithDuplicates(t testing.TB) string {
	t.Helper()
	dsn := PostgresDSN(t)
	s, err := memory.OpenPostgres(t.Context(), dsn, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(t.Context(), "DROP INDEX memories_document"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"dup-1", "dup-2"} {
		body, err := proto.Marshal(&memoryv1.Memory{Id: id, UserId: DuplicatedUser,
			Content: "a chunk stored twice", CreatedAt: timestamppb.New(time.Unix(1, 0))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), `INSERT INTO memories
(id, user_id, collection, created_at, length, vector, body, document_key)
VALUES ($1, $2, '', 1, 0, NULL, $3, $4)`, id, DuplicatedUser, body, DuplicatedKey); err != nil {
			t.Fatal(err)
		}
	}
	return dsn
}

package memory_test

import (
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/memory/storetest"
	"google.golang.org/grpc/codes"
)

// TestNULInNames: a user_id, collection, memory_id or transcript entry's hash holding the NUL
// character is INVALID_ARGUMENT naming the field, on every store. PostgreSQL keeps no NUL in
// text: there such a call failed STORAGE_ERROR (UNAVAILABLE, which callers retry, for ever),
// while the in-memory and SQLite stores took it, so the same request was stored or refused by
// the store behind the stage.
func TestNULInNames(t *testing.T) {
	stores := map[string]func(t *testing.T) memory.Store{
		"memory":   func(*testing.T) memory.Store { return memory.NewMemoryStore() },
		"postgres": func(t *testing.T) memory.Store { return openPostgres(t, storetest.PostgresDSN(t)) },
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, memory.Options{Store: open(t)})
			ctx := t.Context()
			table := []struct {
				name, field string
				call        func() error
			}{
				{"Store for a user with NUL", "user_id", func() error {
					_, err := c.Store(ctx, &memoryv1.StoreRequest{UserId: "a\x00b", Content: user("x")})
					return err
				}},
				{"Store in a collection with NUL", "collection", func() error {
					_, err := c.Store(ctx, &memoryv1.StoreRequest{UserId: "u", Collection: "k\x00",
						Content: user("x")})
					return err
				}},
				{"Search a collection with NUL", "collection", func() error {
					_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "u", Collection: "k\x00",
						Query: "x"})
					return err
				}},
				{"List for a user with NUL", "user_id", func() error {
					_, err := c.List(ctx, &memoryv1.ListRequest{UserId: "a\x00b"})
					return err
				}},
				{"Delete a memory id with NUL", "memory_id", func() error {
					_, err := c.Delete(ctx, &memoryv1.DeleteRequest{UserId: "u", MemoryId: "m\x00"})
					return err
				}},
				{"AppendTranscript a hash with NUL", "entries[0].hash", func() error {
					_, err := c.AppendTranscript(ctx, &memoryv1.AppendTranscriptRequest{RunId: "r",
						Entries: []*typev1.TranscriptEntry{{Seq: 1, Hash: "h\x00"}}})
					return err
				}},
				{"SaveRun for a user with NUL", "user_id", func() error {
					_, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{UserId: "a\x00b",
						Result: &typev1.RunResult{RunId: "r"}})
					return err
				}},
			}
			for _, tc := range table {
				t.Run(tc.name, func(t *testing.T) {
					grpctest.WantStageError(t, tc.call(), codes.InvalidArgument,
						typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.field, "NUL")
				})
			}
		})
	}
}

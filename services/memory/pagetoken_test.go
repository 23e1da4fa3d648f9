package memory_test

import (
	"encoding/base64"
	"strings"
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc/codes"
)

// TestPageTokenNoMemoryID: a page_token whose memory id no memory can have (one holding NUL or
// bytes that are not UTF-8, or longer than a memory id may be) is INVALID_ARGUMENT naming the
// field, on every store. The token reaches the memory stage unchanged from the public API's
// ListMemories; PostgreSQL keeps no such text, and there the call failed STORAGE_ERROR
// (UNAVAILABLE, which callers retry) while the in-memory and SQLite stores listed nothing.
func TestPageTokenNoMemoryID(t *testing.T) {
	onStores(t, everyStore, func(t *testing.T, s memory.Store) {
		c := newClient(t, memory.Options{Store: s})
		store(t, c, "u", "", "a memory to page through")
		for _, id := range []string{"a\x00b", "\xff\xfe", strings.Repeat("m", memory.MaxNameBytes+1)} {
			token := base64.RawURLEncoding.EncodeToString([]byte("1767225600000000000|" + id))
			_, err := c.List(t.Context(), &memoryv1.ListRequest{UserId: "u", PageToken: token})
			grpctest.WantStageError(t, err, codes.InvalidArgument,
				typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "page_token", "not a token returned by List")
		}
	})
}

package memory_test

import (
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc/codes"
)

// TestSearchLimitOverTheMaximum: a limit over memory.MaxSearchLimit is refused, naming the
// field and the rule, not silently cut to the maximum; the maximum itself is taken.
func TestSearchLimitOverTheMaximum(t *testing.T) {
	c := newClient(t, memory.Options{})
	store(t, c, "u", "", "a note about golang")
	resp, err := c.Search(t.Context(), &memoryv1.SearchRequest{UserId: "u", Query: "golang",
		Limit: memory.MaxSearchLimit})
	if err != nil || len(resp.GetHits()) != 1 {
		t.Fatalf("limit %d: %v, %v; want the one hit", memory.MaxSearchLimit, resp.GetHits(), err)
	}
	_, err = c.Search(t.Context(), &memoryv1.SearchRequest{UserId: "u", Query: "golang",
		Limit: memory.MaxSearchLimit + 1})
	grpctest.WantStageError(t, err, codes.InvalidArgument,
		typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "limit must be at most 100, got 101")
}

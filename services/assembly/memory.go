package assembly

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/textcut"
	"github.com/agentmesh/agentmesh/pkg/tokens"
)

// maxMemoryQueryBytes is the memory stage's bound on a search's query (SearchRequest.query):
// a longer memory_query (an intent model's goal may be) is searched with its start.
const maxMemoryQueryBytes = 64 << 10

// recall searches the user's memories for the request's memory_query and returns the search's
// answer: its hits and the accounting of its query's embedding. The search acts for the user
// the Assemble call acts for (auth.ForwardUser), whose memories alone the memory stage
// searches. It returns nil when memory is not configured or not asked for (a memory_query of
// white space alone asks for nothing: the memory stage refuses a blank query), and reports
// unavailable when the search failed or timed out (or was refused).
func (s *Service) recall(ctx context.Context, req *contextv1.AssembleRequest) (found *memoryv1.SearchResponse, unavailable bool) {
	query := strings.TrimSpace(req.GetMemoryQuery())
	if s.memory == nil || query == "" {
		return nil, false
	}
	limit := req.GetMemoryLimit()
	if limit == 0 {
		limit = DefaultMemoryLimit
	}
	ctx, cancel := context.WithTimeout(auth.ForwardUser(ctx), s.memoryTimeout)
	defer cancel()
	resp, err := s.memory.Search(ctx, &memoryv1.SearchRequest{
		UserId: req.GetUserId(),
		Query:  query[:textcut.Boundary(query, maxMemoryQueryBytes)],
		Limit:  limit,
	})
	if err != nil {
		s.log.WarnContext(ctx, "memory unavailable, assembling without it",
			"code", "MEMORY_UNAVAILABLE", "run_id", req.GetRunId(), "error", err)
		return nil, true
	}
	return resp, false
}

// memoryMessage returns one system message listing the hits, best first, and a source per
// hit, dropping the lowest-scored hits until the message fits within budget tokens. It
// returns nil when no hit fits.
func memoryMessage(hits []*memoryv1.MemoryHit, budget int64, counter tokens.Counter) (*typev1.Message, []*typev1.Source) {
	hits = slices.Clone(hits)
	slices.SortStableFunc(hits, func(a, b *memoryv1.MemoryHit) int {
		return cmp.Compare(b.GetRelevanceScore(), a.GetRelevanceScore())
	})
	for ; len(hits) > 0; hits = hits[:len(hits)-1] {
		var text strings.Builder
		text.WriteString("Relevant memories:")
		for i, h := range hits {
			fmt.Fprintf(&text, "\n[%d] %s", i+1, h.GetMemory().GetContent())
		}
		msg := &typev1.Message{Role: typev1.Role_ROLE_SYSTEM, Content: text.String()}
		if counter.Message(msg) > budget {
			continue
		}
		sources := make([]*typev1.Source, len(hits))
		for i, h := range hits {
			sources[i] = &typev1.Source{
				Kind:  "memory",
				Id:    h.GetMemory().GetId(),
				Title: title(h.GetMemory()),
				Score: h.GetRelevanceScore(),
			}
		}
		return msg, sources
	}
	return nil, nil
}

// title is a memory's "title" metadata, else its "source" metadata, else "".
func title(m *memoryv1.Memory) string {
	fields := m.GetMetadata().GetFields()
	for _, key := range []string{"title", "source"} {
		if v := fields[key].GetStringValue(); v != "" {
			return v
		}
	}
	return ""
}

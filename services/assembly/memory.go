package assembly

import (
	"cmp"
	"context"
	"slices"
	"strconv"
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

// memoriesHeader opens the memory message.
const memoriesHeader = "Relevant memories:"

// memoryMessage returns one system message listing the hits, best first, and a source per
// hit, within budget tokens. When not every hit fits, each in turn, best first, joins the
// message if it still fits: a hit too long for the budget is left out alone, not with every
// hit scored below it. It returns nil when no hit fits.
func memoryMessage(hits []*memoryv1.MemoryHit, budget int64, counter tokens.Counter) (*typev1.Message, []*typev1.Source) {
	if len(hits) == 0 {
		return nil, nil
	}
	hits = slices.Clone(hits)
	slices.SortStableFunc(hits, func(a, b *memoryv1.MemoryHit) int {
		return cmp.Compare(b.GetRelevanceScore(), a.GetRelevanceScore())
	})
	text := renderMemories(hits)
	if counter.Message(systemMessage(text)) > budget {
		text = ""
		kept := hits[:0] // filtered in place: kept never passes the hit being read
		for _, h := range hits {
			// The content alone costs about what it adds: skip counting what cannot fit.
			if counter.Text(h.GetMemory().GetContent()) > budget {
				continue
			}
			longer := renderMemories(append(kept, h))
			if counter.Message(systemMessage(longer)) <= budget {
				text, kept = longer, append(kept, h)
			}
		}
		hits = kept
	}
	if len(hits) == 0 {
		return nil, nil
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
	return systemMessage(text), sources
}

// renderMemories is the text of the memory message showing hits, in their order.
func renderMemories(hits []*memoryv1.MemoryHit) string {
	var b strings.Builder
	b.WriteString(memoriesHeader)
	for i, h := range hits {
		b.WriteString("\n[")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString("] ")
		b.WriteString(h.GetMemory().GetContent())
	}
	return b.String()
}

// systemMessage is a system message of text.
func systemMessage(text string) *typev1.Message {
	return &typev1.Message{Role: typev1.Role_ROLE_SYSTEM, Content: text}
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

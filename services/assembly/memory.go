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
// message if it still fits (fitMemories): a hit too long for the budget is left out alone,
// not with every hit scored below it. It returns nil when no hit fits.
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
		hits, text = fitMemories(hits, budget, counter)
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

// fitMemories returns the hits, in order, that join the memory message while it fits in
// budget tokens, and the message's text. Each hit's line is counted once, as it would join:
// the message costs at most the sum of its parts, the header's message and each line. The
// estimate rounds each part up, so that sum may pass the budget by less than a token a part
// when the whole does not: only then is the message counted whole with the hit (the estimate
// is quick). A tokenizer may count the whole above its parts at a rare joint: the message is
// counted whole once at the end, and the last hits leave until it fits.
func fitMemories(
	hits []*memoryv1.MemoryHit, budget int64, counter tokens.Counter,
) ([]*memoryv1.MemoryHit, string) {
	estimate := counter.Encoding() == tokens.EncodingEstimate
	kept := hits[:0] // filtered in place: kept never passes the hit being read
	cost := counter.Message(systemMessage(memoriesHeader))
	for _, h := range hits {
		line := counter.Text(memoryLine(len(kept)+1, h))
		switch n := cost + line; {
		case n <= budget:
			kept, cost = append(kept, h), n
		case estimate && n-int64(len(kept)+2) < budget:
			if whole := counter.Message(systemMessage(renderMemories(append(kept, h)))); whole <= budget {
				kept, cost = append(kept, h), whole
			}
		}
	}
	text := renderMemories(kept)
	for len(kept) > 0 && counter.Message(systemMessage(text)) > budget {
		kept = kept[:len(kept)-1]
		text = renderMemories(kept)
	}
	return kept, text
}

// memoryLine is the line of the memory message that shows hit h as the n-th memory.
func memoryLine(n int, h *memoryv1.MemoryHit) string {
	return "\n[" + strconv.Itoa(n) + "] " + h.GetMemory().GetContent()
}

// renderMemories is the text of the memory message showing hits, in their order.
func renderMemories(hits []*memoryv1.MemoryHit) string {
	var b strings.Builder
	b.WriteString(memoriesHeader)
	for i, h := range hits {
		b.WriteString(memoryLine(i+1, h))
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

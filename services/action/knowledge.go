package action

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Knowledge search constants.
const (
	// KnowledgeCollection is the memory collection knowledge_search searches.
	KnowledgeCollection = "knowledge"
	// EmptySearchResult is knowledge_search's whole result when nothing matches (RAG
	// contract §3), so the model can say it lacks information.
	EmptySearchResult = "DOCUMENTATION_SEARCH_RESULT: EMPTY"
	// KnowledgeMinScore is the relevance (0–1) a chunk needs to be a knowledge_search
	// reference, sent as the search's min_score. With embeddings configured every chunk gets a
	// score from its cosine similarity to the query, so without a floor an unrelated query would
	// still return the least unrelated chunks instead of EmptySearchResult; the memory service
	// scores 0.8 × cosine + 0.2 × lexical, so a chunk sharing no word with the query needs a
	// cosine of 0.375 to pass. With BM25 alone scores are relative to the best hit (which
	// scores 1), and the floor drops chunks matching less than 30% as well as it.
	KnowledgeMinScore = 0.3

	defaultSearchLimit = 5
	maxSearchLimit     = 20
	maxQueryLength     = 2000
)

// knowledgeTool is the knowledge_search built-in, backed by MemoryService.
type knowledgeTool struct {
	def    *typev1.Tool
	memory memoryv1.MemoryServiceClient
}

func newKnowledgeTool(memory memoryv1.MemoryServiceClient) (*knowledgeTool, error) {
	schema, err := objectSchema(map[string]any{
		"query": map[string]any{
			"type":        "string",
			"description": "What to look for in the knowledge base.",
			"minLength":   1,
			"maxLength":   maxQueryLength,
			"pattern":     `\S`,
		},
		"limit": map[string]any{
			"type":        "integer",
			"description": fmt.Sprintf("Maximum number of references (default %d).", defaultSearchLimit),
			"minimum":     1,
			"maximum":     maxSearchLimit,
		},
	}, "query")
	if err != nil {
		return nil, err
	}
	return &knowledgeTool{memory: memory, def: &typev1.Tool{
		Name:        "knowledge_search",
		Description: "Searches the user's knowledge base and returns numbered references, each headed by its title and source file, with its text. Cite them as [n] with the file name.",
		InputSchema: schema,
		Server:      BuiltinServer,
		Idempotent:  true,
	}}, nil
}

// Definition describes knowledge_search.
func (t *knowledgeTool) Definition() *typev1.Tool { return t.def }

// Call searches the knowledge collection of the call's user for references scoring at least
// KnowledgeMinScore; none is EmptySearchResult. The search acts for the user the Execute call
// acts for (auth.ForwardUser), whose knowledge alone the memory stage searches. The search's
// query embedding goes to the call's accounting.
func (t *knowledgeTool) Call(ctx context.Context, call Call) (string, error) {
	if call.UserID == "" {
		return "", errors.New("knowledge_search needs the call's user_id: knowledge is kept per user")
	}
	query, _ := call.Arguments["query"].(string)
	limit := int32(defaultSearchLimit)
	if l, ok := call.Arguments["limit"].(float64); ok {
		limit = int32(l)
	}
	resp, err := t.memory.Search(auth.ForwardUser(ctx), &memoryv1.SearchRequest{
		UserId:     call.UserID,
		Query:      query,
		Limit:      limit,
		Collection: KnowledgeCollection,
		MinScore:   KnowledgeMinScore,
	})
	call.Accounting.Add(resp.GetAccounting()...) // the query's embedding
	if err != nil {
		if status.Code(err) == codes.Unavailable || stageerr.FromError(err).Retryable() {
			return "", fmt.Errorf("%w: knowledge search: %s", ErrTransient, status.Convert(err).Message())
		}
		return "", fmt.Errorf("knowledge search: %s", status.Convert(err).Message())
	}
	if len(resp.GetHits()) == 0 {
		return EmptySearchResult, nil
	}
	refs := make([]string, len(resp.GetHits()))
	for i, hit := range resp.GetHits() {
		refs[i] = fmt.Sprintf("[%d] %s (score %.2f)\n%s", i+1, hitLabel(hit.GetMemory()), hit.GetRelevanceScore(), hit.GetMemory().GetContent())
	}
	return strings.Join(refs, "\n\n"), nil
}

// hitLabel names a reference: its title and the file it comes from ("Retry policy —
// ops/retry.md"), from its metadata (those agentmesh ingest stores), so that the model can
// cite the file (RAG contract §4); the file alone when it has no other title (an ingested file
// without a heading is titled by its name); else its title, or its id.
func hitLabel(m *memoryv1.Memory) string {
	fields := m.GetMetadata().GetFields()
	title := oneLine(fields["title"].GetStringValue())
	source := oneLine(fields["source"].GetStringValue())
	switch {
	case source == "":
		return cmp.Or(title, m.GetId())
	case title == "" || title == source || title == path.Base(source):
		return source
	}
	return title + " — " + source
}

// oneLine is s with its runs of white space, line breaks included, made one space: a label
// is the first line of its reference.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

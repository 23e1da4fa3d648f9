package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/recall"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Store saves a memory of the user, with its embedding when an embedder is configured (an
// embedding failure stores it without one). Its relevance_score (and the memory's
// importance) is the importance heuristic of importance.go. A user at the quota gets
// MEMORY_FULL.
func (s *Service) Store(ctx context.Context, req *memoryv1.StoreRequest) (*memoryv1.StoreResponse, error) {
	user, err := s.owner(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	content := req.GetContent().GetContent()
	if strings.TrimSpace(content) == "" {
		return nil, stageerr.Invalid("content must be a message with non-empty content")
	}
	if n := len(content); n > MaxContentBytes {
		return nil, stageerr.Invalid("content.content: at most %d bytes, got %d", MaxContentBytes, n)
	}
	if err := checkCollection(req.GetCollection()); err != nil {
		return nil, err
	}
	if n := len(req.GetConversationId()); n > MaxNameBytes {
		return nil, stageerr.Invalid("conversation_id: at most %d bytes, got %d", MaxNameBytes, n)
	}
	if n := proto.Size(req.GetMetadata()); n > MaxMetadataBytes {
		return nil, stageerr.Invalid("metadata: at most %d bytes encoded, got %d", MaxMetadataBytes, n)
	}
	if err := checkJSON("metadata", structpb.NewStructValue(req.GetMetadata())); err != nil {
		return nil, err
	}
	m, err := s.newMemory(user, req.GetCollection(), req.GetConversationId(), content,
		proto.CloneOf(req.GetMetadata()))
	if err != nil {
		return nil, err
	}
	var vector []float32
	if s.embedder != nil {
		if vector, _, err = s.embedOne(ctx, content); err != nil {
			s.log.WarnContext(ctx, "embedding failed, storing the memory without a vector: semantic search will find it by its words only",
				"user_id", m.GetUserId(), "memory_id", m.GetId(), "error", err)
		}
	}
	err = s.store.PutMemory(ctx, m, vector, s.quota)
	s.wrote(user)
	if err != nil {
		if errors.Is(err, ErrQuotaExceeded) {
			return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL,
				"user %q has %d of %d memories", user, s.quota, s.quota)
		}
		return nil, s.storeError(ctx, "store memory", err)
	}
	return &memoryv1.StoreResponse{Stored: true, MemoryId: m.GetId(), RelevanceScore: m.GetImportance()}, nil
}

// newMemory is a new memory of user in collection and conversation with content and the
// metadata meta (kept, not copied): its id, time and importance are set.
func (s *Service) newMemory(user, collection, conversation, content string, meta *structpb.Struct) (*memoryv1.Memory, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new memory id: %w", err)
	}
	return &memoryv1.Memory{
		Id:             id.String(),
		UserId:         user,
		ConversationId: conversation,
		Collection:     collection,
		Content:        content,
		Metadata:       meta,
		CreatedAt:      timestamppb.New(s.now()),
		Importance:     importance(content),
	}, nil
}

// Search ranks the user's memories in the collection against the query: semantically when an
// embedder is configured and embeds the query, with BM25 otherwise (see the package
// documentation). Scores are in (0, 1]; only hits scoring at least min_score are returned, at
// most limit (default 5; over 100 is INVALID_INPUT). The response accounts the query's
// embedding request, for the run the search is made for; a search that then fails in the
// store loses that entry with its answer.
func (s *Service) Search(ctx context.Context, req *memoryv1.SearchRequest) (*memoryv1.SearchResponse, error) {
	user, err := s.owner(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.GetQuery()) == "" {
		return nil, stageerr.Invalid("query must not be empty")
	}
	if n := len(req.GetQuery()); n > MaxQueryBytes {
		return nil, stageerr.Invalid("query: at most %d bytes, got %d", MaxQueryBytes, n)
	}
	if err := checkCollection(req.GetCollection()); err != nil {
		return nil, err
	}
	switch n := req.GetLimit(); {
	case n < 0:
		return nil, stageerr.Invalid("limit must not be negative, got %d", n)
	case n > recall.MaxHits:
		return nil, stageerr.Invalid("limit must be at most %d, got %d", recall.MaxHits, n)
	}
	if ms := req.GetMinScore(); math.IsNaN(ms) || ms < 0 || ms > 1 {
		return nil, stageerr.Invalid("min_score must be between 0 and 1, got %v", ms)
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = DefaultSearchLimit
	}
	q := SearchQuery{
		UserID:     user,
		Collection: req.GetCollection(),
		Query:      req.GetQuery(),
		Limit:      limit,
		MinScore:   req.GetMinScore(),
	}
	key := searchKey{user: user, collection: q.Collection, query: q.Query, limit: q.Limit, minScore: q.MinScore}
	var writes uint64
	if s.searches != nil {
		if hits, ok := s.searches.get(key, s.now()); ok {
			return &memoryv1.SearchResponse{Hits: hits}, nil // no embedding request: none accounted
		}
		writes = s.searches.begin()
	}
	resp := &memoryv1.SearchResponse{}
	degraded := false // the query's embedding failed: BM25 alone ranked the hits
	if s.embedder != nil {
		vector, entry, err := s.embedOne(ctx, req.GetQuery())
		if err != nil {
			s.log.WarnContext(ctx, "embedding the query failed, falling back to BM25 search",
				"user_id", user, "error", err)
			degraded = true
		}
		if entry != nil {
			resp.Accounting = append(resp.Accounting, entry)
		}
		q.Vector = vector
	}
	hits, err := s.store.SearchMemories(ctx, q)
	if err != nil {
		return nil, s.storeError(ctx, "search memories", err)
	}
	if s.searches != nil && !degraded {
		s.searches.put(key, hits, s.now(), writes)
	}
	resp.Hits = hits
	return resp, nil
}

// wrote tells the search cache that the memories of user changed (or may have: a failed write).
func (s *Service) wrote(user string) {
	if s.searches != nil {
		s.searches.wrote(user)
	}
}

// List pages through the user's memories in the collection, newest first (page_size default
// 50, at most 500). next_page_token is opaque and empty on the last page.
func (s *Service) List(ctx context.Context, req *memoryv1.ListRequest) (*memoryv1.ListResponse, error) {
	user, err := s.owner(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	if err := checkCollection(req.GetCollection()); err != nil {
		return nil, err
	}
	if req.GetPageSize() < 0 {
		return nil, stageerr.Invalid("page_size must not be negative, got %d", req.GetPageSize())
	}
	after, err := decodePageToken(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	size := int(req.GetPageSize())
	if size == 0 {
		size = DefaultPageSize
	}
	size = min(size, MaxPageSize)
	// One extra memory tells whether another page follows.
	page, err := s.store.ListMemories(ctx, ListQuery{
		UserID:     user,
		Collection: req.GetCollection(),
		After:      after,
		Limit:      size + 1,
	})
	if err != nil {
		return nil, s.storeError(ctx, "list memories", err)
	}
	resp := &memoryv1.ListResponse{Memories: page}
	if len(page) > size {
		resp.Memories = page[:size]
		last := resp.Memories[size-1]
		resp.NextPageToken = encodePageToken(Cursor{CreatedAt: last.GetCreatedAt().AsTime(), ID: last.GetId()})
	}
	return resp, nil
}

// Delete removes one of the user's memories; a memory the user does not own is NOT_FOUND.
func (s *Service) Delete(ctx context.Context, req *memoryv1.DeleteRequest) (*memoryv1.DeleteResponse, error) {
	user, err := s.owner(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	switch n := len(req.GetMemoryId()); {
	case n == 0:
		return nil, stageerr.Invalid("memory_id must not be empty")
	case n > MaxNameBytes: // ids are UUIDs: a longer one names no memory
		return nil, stageerr.Invalid("memory_id: at most %d bytes, got %d", MaxNameBytes, n)
	}
	if err := checkNoNUL("memory_id", req.GetMemoryId()); err != nil {
		return nil, err
	}
	err = s.store.DeleteMemory(ctx, user, req.GetMemoryId())
	s.wrote(user)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "memory %q not found", req.GetMemoryId())
		}
		return nil, s.storeError(ctx, "delete memory", err)
	}
	return &memoryv1.DeleteResponse{Deleted: true}, nil
}

// checkUser refuses a request without a user_id, or with one over MaxUserIDBytes or holding
// NUL (checkNoNUL).
func checkUser(userID string) error {
	switch n := len(userID); {
	case n == 0:
		return stageerr.Invalid("user_id must not be empty")
	case n > MaxUserIDBytes:
		return stageerr.Invalid("user_id: at most %d bytes, got %d", MaxUserIDBytes, n)
	}
	return checkNoNUL("user_id", userID)
}

// checkCollection refuses a collection over MaxNameBytes or holding NUL (checkNoNUL): no memory
// is stored in one, so a search or a listing of it is refused as a memory stored in it is, not
// answered as empty.
func checkCollection(collection string) error {
	if n := len(collection); n > MaxNameBytes {
		return stageerr.Invalid("collection: at most %d bytes, got %d", MaxNameBytes, n)
	}
	return checkNoNUL("collection", collection)
}

// checkNoNUL refuses the value of a field that holds the NUL character. The stores keep
// identifiers as text, which PostgreSQL's cannot hold NUL in: every store refuses it alike,
// rather than one failing such a call with STORAGE_ERROR, which callers retry.
func checkNoNUL(field, value string) error {
	if strings.IndexByte(value, 0) >= 0 {
		return stageerr.Invalid("%s must not contain the NUL character", field)
	}
	return nil
}

// checkJSON refuses a value of v (field names it) that JSON cannot hold, at any depth, naming
// its key: a number that is NaN or ±Inf, and a value of no kind (a google.protobuf.Value none
// of whose oneof is set). google.protobuf.Value's JSON form (protojson, every JSON reader of
// the memory) fails on either, although the stores, which keep a memory's protobuf encoding,
// would take it. It refuses an empty key too, which names nothing.
func checkJSON(field string, v *structpb.Value) error {
	switch k := v.GetKind().(type) {
	case nil:
		return stageerr.Invalid("%s: must be null, a number, a string, a bool, an object or a list; it is none", field)
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return stageerr.Invalid("%s: must be a finite number, got %v", field, k.NumberValue)
		}
	case *structpb.Value_StructValue:
		for _, key := range slices.Sorted(maps.Keys(k.StructValue.GetFields())) {
			if key == "" {
				return stageerr.Invalid("%s[\"\"]: a key must not be empty", field)
			}
			if err := checkJSON(fmt.Sprintf("%s[%q]", field, key), k.StructValue.GetFields()[key]); err != nil {
				return err
			}
		}
	case *structpb.Value_ListValue:
		for i, item := range k.ListValue.GetValues() {
			if err := checkJSON(fmt.Sprintf("%s[%d]", field, i), item); err != nil {
				return err
			}
		}
	}
	return nil
}

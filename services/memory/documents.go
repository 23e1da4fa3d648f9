package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// embedBatch is the number of chunks StoreDocument embeds in one request: some 32,000 tokens of
// IngestDir's chunks, within what embedding APIs take in one request.
const embedBatch = 64

// StoreDocument replaces the user's chunks of the document its metadata names (its MetaSource
// and MetaFolder, in its collection) with the request's chunks, each one memory whose metadata
// is the document's and the chunk's, as a unit (Store.PutDocument): of two requests for the
// same document at the same time, the collection keeps the chunks of the one that finished
// last, never some of each. Each chunk is checked as Store checks a memory, embedded with an
// embedder (a failure stores it without a vector), and scored by the importance heuristic. A
// user whose memories would then pass the quota gets MEMORY_FULL, and keeps the chunks stored
// before.
func (s *Service) StoreDocument(ctx context.Context, req *memoryv1.StoreDocumentRequest) (*memoryv1.StoreDocumentResponse, error) {
	user, err := s.owner(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	if err := checkCollection(req.GetCollection()); err != nil {
		return nil, err
	}
	meta := req.GetMetadata()
	fields := meta.GetFields()
	if _, ok := fields[MetaSource].GetKind().(*structpb.Value_StringValue); !ok || fields[MetaSource].GetStringValue() == "" {
		return nil, stageerr.Invalid("metadata[%q]: must be a non-empty string naming the document", MetaSource)
	}
	if folder, ok := fields[MetaFolder]; ok {
		if _, ok := folder.GetKind().(*structpb.Value_StringValue); !ok {
			return nil, stageerr.Invalid("metadata[%q]: must be a string", MetaFolder)
		}
	}
	if err := checkJSON("metadata", structpb.NewStructValue(meta)); err != nil {
		return nil, err
	}
	doc := Document{UserID: user, Name: documentNameOf(req.GetCollection(), "", meta),
		Chunks: make([]*memoryv1.Memory, len(req.GetChunks()))}
	keys := make(map[string]int, len(req.GetChunks()))
	for i, c := range req.GetChunks() {
		m, err := s.documentChunk(user, req.GetCollection(), meta, i, c)
		if err != nil {
			return nil, err
		}
		key := documentKey(m)
		if j, ok := keys[key]; ok {
			return nil, stageerr.Invalid("chunks[%d]: the same content and metadata as chunks[%d]", i, j)
		}
		keys[key] = i
		doc.Chunks[i] = m
	}
	if s.embedder != nil {
		doc.Vectors = s.embedChunks(ctx, doc.Chunks)
	}
	replaced, err := s.store.PutDocument(ctx, doc, s.quota)
	s.wrote(user)
	if err != nil {
		if errors.Is(err, ErrQuotaExceeded) {
			return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL,
				"the document's %d chunk(s) would take user %q past its quota of %d memories",
				len(doc.Chunks), user, s.quota)
		}
		return nil, s.storeError(ctx, "store document", err)
	}
	resp := &memoryv1.StoreDocumentResponse{ReplacedIds: replaced}
	for _, m := range doc.Chunks {
		resp.MemoryIds = append(resp.MemoryIds, m.GetId())
	}
	return resp, nil
}

// documentChunk checks chunk i of a document of the user's collection whose metadata is meta,
// and returns its memory.
func (s *Service) documentChunk(user, collection string, meta *structpb.Struct, i int,
	c *memoryv1.DocumentChunk) (*memoryv1.Memory, error) {
	content := c.GetContent()
	if strings.TrimSpace(content) == "" {
		return nil, stageerr.Invalid("chunks[%d].content must not be empty", i)
	}
	if n := len(content); n > MaxContentBytes {
		return nil, stageerr.Invalid("chunks[%d].content: at most %d bytes, got %d", i, MaxContentBytes, n)
	}
	field := fmt.Sprintf("chunks[%d].metadata", i)
	merged := proto.CloneOf(meta)
	if merged == nil {
		merged = &structpb.Struct{}
	}
	if merged.Fields == nil {
		merged.Fields = make(map[string]*structpb.Value)
	}
	own := c.GetMetadata().GetFields()
	for _, k := range slices.Sorted(maps.Keys(own)) {
		if _, ok := merged.Fields[k]; ok {
			return nil, stageerr.Invalid("%s[%q]: the document's metadata has it", field, k)
		}
		merged.Fields[k] = proto.CloneOf(own[k])
	}
	if n := proto.Size(merged); n > MaxMetadataBytes {
		return nil, stageerr.Invalid("%s: at most %d bytes encoded with the document's metadata, got %d",
			field, MaxMetadataBytes, n)
	}
	if err := checkJSON(field, structpb.NewStructValue(c.GetMetadata())); err != nil {
		return nil, err
	}
	return s.newMemory(user, collection, "", content, merged)
}

// embedChunks returns the vectors of the chunks, embedded embedBatch at a time; a chunk whose
// batch could not be embedded, or whose vector holds NaN or an infinity, has none (logged), as
// a memory Store could not embed.
func (s *Service) embedChunks(ctx context.Context, chunks []*memoryv1.Memory) [][]float32 {
	vectors := make([][]float32, len(chunks))
	warn := func(from, to int, err error) {
		s.log.WarnContext(ctx, "embedding failed, storing chunks of the document without "+
			"vectors: semantic search will find them by their words only",
			"user_id", chunks[from].GetUserId(), "chunks", fmt.Sprintf("%d to %d", from, to),
			"error", err)
	}
	for start := 0; start < len(chunks); start += embedBatch {
		batch := chunks[start:min(start+embedBatch, len(chunks))]
		texts := make([]string, len(batch))
		for i, m := range batch {
			texts[i] = m.GetContent()
		}
		embedded, _, err := s.embedder.Embed(ctx, texts)
		if err == nil && len(embedded) != len(texts) {
			err = fmt.Errorf("%d vectors for %d chunks", len(embedded), len(texts))
		}
		if err != nil {
			warn(start, start+len(batch)-1, err)
			continue
		}
		for i, v := range embedded {
			switch at, bad := notFinite(v); {
			case len(v) == 0:
				warn(start+i, start+i, errors.New("the embedder returned no vector"))
			case bad:
				warn(start+i, start+i, fmt.Errorf("value %d of its vector is %v", at, v[at]))
			default:
				vectors[start+i] = v
			}
		}
	}
	return vectors
}

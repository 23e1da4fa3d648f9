package memory

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/textcut"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// MaxChunkBytes is the size limit of one chunk IngestDir stores (about 500 tokens).
const MaxChunkBytes = 2000

// MaxTitleBytes bounds the MetaTitle of an ingested chunk: a longer first heading is cut, ending
// in "…". Every chunk of a file carries its title, within MaxMetadataBytes.
const MaxTitleBytes = 1000

// Metadata keys of ingested chunks.
const (
	// MetaTitle is the document's first Markdown heading (cut to MaxTitleBytes), else its file
	// name.
	MetaTitle = "title"
	// MetaSource is the file's path relative to the ingested folder, with / separators.
	MetaSource = "source"
	// MetaFolder is the ingested folder's name (links resolved), which a folder is known by:
	// the same wherever it is (a fresh checkout, another machine).
	MetaFolder = "folder"
	// MetaChunk is the chunk's index in its file, from 0.
	MetaChunk = "chunk"
	// MetaChunks is the number of chunks of the file.
	MetaChunks = "chunks"
)

// ingestExts are the extensions of the files IngestDir reads.
var ingestExts = map[string]bool{".md": true, ".markdown": true, ".txt": true}

// IngestReport says what IngestDir did.
type IngestReport struct {
	// Files is the number of files stored.
	Files int
	// Chunks is the number of memories stored.
	Chunks int
	// Replaced is the number of memories of earlier ingestions of the same files deleted.
	Replaced int
	// Removed is the number of memories deleted because their file is gone from the folder.
	Removed int
	// Skipped lists the files without text (relative paths).
	Skipped []string
}

// IngestDir stores every .md, .markdown and .txt file under dir (recursively; names starting
// with "." and symbolic links under dir are left out; dir itself may be a link to the
// directory) in the user's collection, split by chunkText into chunks of at most
// MaxChunkBytes at paragraph boundaries. Each chunk is one memory with metadata MetaTitle,
// MetaSource, MetaFolder, MetaChunk and MetaChunks. Ingesting a file again replaces the chunks
// stored from the same source path of the same folder, known by its name wherever it is (and
// those of that path stored without a folder, by an earlier release), so re-running after
// edits does not duplicate them; a file of the same path in a folder of another name is
// another document, kept beside it. A file's chunks replace its earlier ones as a unit
// (MemoryService.StoreDocument), so that of two ingestions of a file at the same time, the
// collection keeps the chunks of the one that stored the file last. Once every file is
// stored, the chunks of the folder's files that are gone from it are deleted, so the
// collection holds what the folder holds. Invalid UTF-8, in a file's text or in a file's or
// the folder's name, is replaced by U+FFFD.
//
// Its calls act for the user (auth.OutgoingUser), as the memory stage requires when it
// enforces isolation. It stops at the first failure (e.g. MEMORY_FULL when the quota is
// reached) and returns what it did so far with the error, which names the file; the file that
// failed keeps the chunks an earlier ingestion stored (ingestFile).
func IngestDir(ctx context.Context, client memoryv1.MemoryServiceClient, userID, collection, dir string) (IngestReport, error) {
	var report IngestReport
	if userID == "" {
		return report, errors.New("ingest: the user id is empty")
	}
	ctx = auth.OutgoingUser(ctx, userID)
	info, err := os.Stat(dir)
	if err != nil {
		return report, fmt.Errorf("ingest: %w", err)
	}
	if !info.IsDir() {
		return report, fmt.Errorf("ingest: %s is not a directory", dir)
	}
	root, err := folderPath(dir)
	if err != nil {
		return report, fmt.Errorf("ingest: %w", err)
	}
	files, err := ingestFiles(root)
	if err != nil {
		return report, fmt.Errorf("ingest: %w", err)
	}
	previous, err := storedSources(ctx, client, userID, collection, folderName(root))
	if err != nil {
		return report, fmt.Errorf("ingest: list the collection %q: %w", collection, err)
	}
	for _, rel := range files {
		err := ingestFile(ctx, client, userID, collection, root, rel, previous[metaName(rel)], &report)
		if err != nil {
			return report, fmt.Errorf("ingest %s: %w", rel, err)
		}
	}
	if err := removeGone(ctx, client, userID, files, previous, &report); err != nil {
		return report, fmt.Errorf("ingest: %w", err)
	}
	return report, nil
}

// removeGone deletes the chunks of the folder's files that are not among files any more
// (those stored from no known folder stay: they may be another folder's).
func removeGone(ctx context.Context, client memoryv1.MemoryServiceClient, userID string,
	files []string, previous map[string][]storedChunk, report *IngestReport) error {
	present := make(map[string]bool, len(files))
	for _, rel := range files {
		present[metaName(rel)] = true
	}
	for _, src := range slices.Sorted(maps.Keys(previous)) {
		if present[src] {
			continue
		}
		ofFolder := slices.DeleteFunc(slices.Clone(previous[src]),
			func(c storedChunk) bool { return !c.ofFolder })
		if err := deleteChunks(ctx, client, userID, ofFolder, &report.Removed); err != nil {
			return fmt.Errorf("%s, gone from the folder: %w", src, err)
		}
	}
	return nil
}

// folderPath is the absolute path of the folder dir, links resolved: its name (folderName) is
// the same whichever link or relative path names the folder. dir may be a symbolic link to the
// folder, which WalkDir does not follow.
func folderPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// folderName is the MetaFolder of the chunks of the files of the folder root (folderPath):
// its name, not its path, so that the folder ingested again from another place (a fresh
// checkout in a new temporary directory, another machine) replaces its chunks, and no path
// of the machine that ingested it is stored.
func folderName(root string) string { return metaName(filepath.Base(root)) }

// ingestFiles returns the relative paths (with / separators) of the files to ingest under the
// folder root (folderPath), in lexical order.
func ingestFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !ingestExts[strings.ToLower(filepath.Ext(path))] {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	return files, err
}

// metaName is a file or folder name as metadata keeps it: a name that is not valid UTF-8 (a
// Latin-1 name on Linux), which no protobuf string holds, with U+FFFD in place of its bad bytes.
func metaName(name string) string { return strings.ToValidUTF8(name, "\uFFFD") }

// cutTitle returns title cut to MaxTitleBytes, where no character is split, ending in "…" when
// it was cut.
func cutTitle(title string) string {
	const mark = "…"
	if len(title) <= MaxTitleBytes {
		return title
	}
	return title[:textcut.Boundary(title, MaxTitleBytes-len(mark))] + mark
}

// storedChunk is a memory of an earlier ingestion.
type storedChunk struct {
	id string
	// ofFolder is whether it records the folder being ingested; false for one stored by an
	// earlier release, from no known folder.
	ofFolder bool
	// key is its documentKey: a chunk stored with the same key replaced it.
	key string
}

// storedSources maps the source paths of the collection's memories ingested from the folder
// root (its metaName), or from no known folder, to those memories.
func storedSources(ctx context.Context, client memoryv1.MemoryServiceClient,
	userID, collection, root string) (map[string][]storedChunk, error) {
	sources := make(map[string][]storedChunk)
	token := ""
	for {
		resp, err := client.List(ctx, &memoryv1.ListRequest{UserId: userID, Collection: collection, PageSize: MaxPageSize, PageToken: token})
		if err != nil {
			return nil, err
		}
		for _, m := range resp.GetMemories() {
			fields := m.GetMetadata().GetFields()
			src, folder := fields[MetaSource].GetStringValue(), fields[MetaFolder].GetStringValue()
			if src != "" && (folder == "" || folder == root) {
				sources[src] = append(sources[src], storedChunk{id: m.GetId(), ofFolder: folder == root,
					key: documentKey(m)})
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return sources, nil
		}
	}
}

// ingestFile replaces the chunks stored from rel of the folder dir (the memories old) with its
// current ones, in one StoreDocument: the memory stage replaces the file's chunks as a unit,
// so an ingestion that fails keeps them as they were, and of two ingestions of the file at the
// same time the one that finishes last leaves its chunks, never some of each. The memories of
// old it did not replace (stored from no known folder by an earlier release, or before the
// memory stage knew their document) are deleted after it; when the quota leaves no room for the
// new chunks beside them (MEMORY_FULL), before it. A memory stage without StoreDocument (of an
// earlier release: UNIMPLEMENTED) is sent the chunks one by one (ingestChunks).
func ingestFile(ctx context.Context, client memoryv1.MemoryServiceClient,
	userID, collection, dir, rel string, old []storedChunk, report *IngestReport) error {
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	text := string(data)
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	doc := document{title: cutTitle(metaName(documentTitle(rel, text))), source: metaName(rel),
		folder: folderName(dir), chunks: chunkText(text, MaxChunkBytes)}
	stored, replaced, err := doc.replace(ctx, client, userID, collection)
	if status.Code(err) == codes.Unimplemented {
		return ingestChunks(ctx, client, userID, collection, rel, doc, old, report)
	}
	if memoryFull(err) && len(old) > 0 {
		if err := deleteChunks(ctx, client, userID, old, &report.Replaced); err != nil {
			return fmt.Errorf("delete the earlier chunks to make room: %w", err)
		}
		old = nil
		stored, replaced, err = doc.replace(ctx, client, userID, collection)
	}
	if err != nil {
		return err
	}
	report.Replaced += len(replaced)
	gone := make(map[string]bool, len(replaced))
	for _, id := range replaced {
		gone[id] = true
	}
	rest := slices.DeleteFunc(slices.Clone(old), func(c storedChunk) bool { return gone[c.id] })
	if err := deleteChunks(ctx, client, userID, rest, &report.Replaced); err != nil {
		return fmt.Errorf("delete the earlier chunks: %w", err)
	}
	report.counted(rel, doc, stored)
	return nil
}

// memoryFull reports whether err is MEMORY_FULL.
func memoryFull(err error) bool {
	return err != nil &&
		stageerr.FromError(err).Code == typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL
}

// counted counts in the report the chunks stored of the file rel, doc's.
func (r *IngestReport) counted(rel string, doc document, stored []storedChunk) {
	r.Chunks += len(stored)
	if len(doc.chunks) == 0 {
		r.Skipped = append(r.Skipped, rel)
	} else {
		r.Files++
	}
}

// ingestChunks replaces the chunks stored from rel (the memories old) with doc's, stored one by
// one, for a memory stage without StoreDocument. It stores the new chunks before it deletes
// the earlier ones, so that a failure partway leaves the file's earlier chunks as they were:
// it deletes the new ones it stored, except those that replaced an unchanged earlier chunk
// (the same documentKey), best effort (the memory stage may be the failure), and returns the
// error. When the quota leaves no room for both (MEMORY_FULL), it deletes the earlier chunks
// first, as the file could not be replaced otherwise. Two such ingestions of a changed file at
// the same time may leave the chunks of both.
func ingestChunks(ctx context.Context, client memoryv1.MemoryServiceClient,
	userID, collection, rel string, doc document, old []storedChunk, report *IngestReport) error {
	stored, err := doc.store(ctx, client, userID, collection)
	if memoryFull(err) && len(old) > 0 {
		if err := deleteChunks(ctx, client, userID, stored, nil); err != nil {
			return fmt.Errorf("delete the new chunks stored before the quota was reached: %w", err)
		}
		if err := deleteChunks(ctx, client, userID, old, &report.Replaced); err != nil {
			return fmt.Errorf("delete the earlier chunks to make room: %w", err)
		}
		old = nil
		stored, err = doc.store(ctx, client, userID, collection)
	}
	if err != nil {
		if len(old) > 0 {
			// The earlier chunks stay: the new ones stored would sit beside them. A new one
			// that replaced an earlier one (the same chunk, unchanged) stays in its place.
			added := slices.DeleteFunc(slices.Clone(stored), func(c storedChunk) bool {
				return slices.ContainsFunc(old, func(o storedChunk) bool { return o.key == c.key })
			})
			err = errors.Join(err, deleteChunks(context.WithoutCancel(ctx), client, userID, added, nil))
		} else {
			report.Chunks += len(stored)
		}
		return err
	}
	if err := deleteChunks(ctx, client, userID, old, &report.Replaced); err != nil {
		return fmt.Errorf("delete the earlier chunks: %w", err)
	}
	report.counted(rel, doc, stored)
	return nil
}

// document is a file to ingest, split into chunks.
type document struct {
	title, source, folder string
	chunks                []string
}

// metadata returns the metadata of every chunk of the document: its title, source and folder.
func (d document) metadata() (*structpb.Struct, error) {
	return structpb.NewStruct(map[string]any{MetaTitle: d.title, MetaSource: d.source, MetaFolder: d.folder})
}

// chunkMetadata returns the metadata of the document's chunk i alone: its index and the number
// of chunks.
func (d document) chunkMetadata(i int) (*structpb.Struct, error) {
	return structpb.NewStruct(map[string]any{MetaChunk: i, MetaChunks: len(d.chunks)})
}

// replace stores the document's chunks in place of those stored before (StoreDocument), and
// returns those it stored and the ids of the memories they replaced.
func (d document) replace(ctx context.Context, client memoryv1.MemoryServiceClient,
	userID, collection string) (stored []storedChunk, replaced []string, err error) {
	meta, err := d.metadata()
	if err != nil {
		return nil, nil, err
	}
	req := &memoryv1.StoreDocumentRequest{UserId: userID, Collection: collection, Metadata: meta,
		Chunks: make([]*memoryv1.DocumentChunk, len(d.chunks))}
	for i, text := range d.chunks {
		own, err := d.chunkMetadata(i)
		if err != nil {
			return nil, nil, err
		}
		req.Chunks[i] = &memoryv1.DocumentChunk{Content: text, Metadata: own}
	}
	resp, err := client.StoreDocument(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	if got := len(resp.GetMemoryIds()); got != len(d.chunks) {
		return nil, nil, fmt.Errorf("the memory stage stored %d chunks of %d", got, len(d.chunks))
	}
	for _, id := range resp.GetMemoryIds() {
		stored = append(stored, storedChunk{id: id, ofFolder: true})
	}
	return stored, resp.GetReplacedIds(), nil
}

// store stores the document's chunks, each one memory of the collection, and returns those
// it stored: all of them, or those before the first that failed with its error.
func (d document) store(ctx context.Context, client memoryv1.MemoryServiceClient,
	userID, collection string) ([]storedChunk, error) {
	stored := make([]storedChunk, 0, len(d.chunks))
	for i, chunk := range d.chunks {
		meta, err := d.metadata()
		if err != nil {
			return stored, err
		}
		own, err := d.chunkMetadata(i)
		if err != nil {
			return stored, err
		}
		maps.Copy(meta.Fields, own.GetFields())
		resp, err := client.Store(ctx, &memoryv1.StoreRequest{
			UserId:     userID,
			Collection: collection,
			Content:    &typev1.Message{Role: typev1.Role_ROLE_USER, Content: chunk},
			Metadata:   meta,
		})
		if err != nil {
			return stored, fmt.Errorf("store chunk %d of %d: %w", i+1, len(d.chunks), err)
		}
		key := documentKey(&memoryv1.Memory{Collection: collection, Content: chunk, Metadata: meta})
		stored = append(stored, storedChunk{id: resp.GetMemoryId(), ofFolder: true, key: key})
	}
	return stored, nil
}

// deleteChunks deletes the chunks, stopping at the first failure, and counts those it deleted
// in deleted, unless it is nil. A chunk already gone (NOT_FOUND) counts as deleted: storing
// the same chunk again replaced it, or an ingestion of the folder at the same time deleted it.
func deleteChunks(ctx context.Context, client memoryv1.MemoryServiceClient, userID string,
	chunks []storedChunk, deleted *int) error {
	for _, c := range chunks {
		_, err := client.Delete(ctx, &memoryv1.DeleteRequest{UserId: userID, MemoryId: c.id})
		gone := err != nil &&
			stageerr.FromError(err).Code == typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND
		if err != nil && !gone {
			return fmt.Errorf("delete chunk %s: %w", c.id, err)
		}
		if deleted != nil {
			*deleted++
		}
	}
	return nil
}

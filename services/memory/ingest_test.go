package memory_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// writeFiles creates files (relative path → content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// listAll returns every memory of the user's collection.
func listAll(t *testing.T, c memoryv1.MemoryServiceClient, userID, collection string) []*memoryv1.Memory {
	t.Helper()
	resp, err := c.List(t.Context(), &memoryv1.ListRequest{UserId: userID, Collection: collection, PageSize: memory.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetMemories()
}

// bySource groups chunks by their source metadata, each group in chunk order.
func bySource(ms []*memoryv1.Memory) map[string][]*memoryv1.Memory {
	out := make(map[string][]*memoryv1.Memory)
	for _, m := range ms {
		src := m.GetMetadata().GetFields()[memory.MetaSource].GetStringValue()
		out[src] = append(out[src], m)
	}
	for _, group := range out {
		slices.SortFunc(group, func(a, b *memoryv1.Memory) int {
			return int(a.GetMetadata().GetFields()[memory.MetaChunk].GetNumberValue() - b.GetMetadata().GetFields()[memory.MetaChunk].GetNumberValue())
		})
	}
	return out
}

func TestIngestDir(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	dir := t.TempDir()
	var long strings.Builder
	long.WriteString("# Operations handbook\n\n")
	for i := range 40 {
		long.WriteString(strings.Repeat("The on-call engineer restarts the ingest worker. ", 3))
		long.WriteString("Paragraph " + string(rune('A'+i%26)) + ".\n\n")
	}
	writeFiles(t, dir, map[string]string{
		"guide.md":            "```sh\n# not the title\n```\n\n# Deploying agentmesh\n\nRun make build, then start the mesh.\n",
		"notes/faq.txt":       "Backups run nightly at 02:00.\n\nThey are kept for thirty days.",
		"notes/handbook.MD":   long.String(),
		"notes/empty.md":      "  \n\n",
		"notes/image.png":     "not text",
		".git/HEAD.md":        "# hidden directory",
		"notes/.draft.md":     "# hidden file",
		"notes/deep/more.txt": "Deep file about kubernetes.",
	})

	report, err := memory.IngestDir(ctx, c, "alice", "knowledge", dir)
	if err != nil {
		t.Fatal(err)
	}
	chunks := listAll(t, c, "alice", "knowledge")
	groups := bySource(chunks)
	if got := slices.Sorted(maps.Keys(groups)); !slices.Equal(got, []string{"guide.md", "notes/deep/more.txt", "notes/faq.txt", "notes/handbook.MD"}) {
		t.Errorf("sources = %v", got)
	}
	if report.Files != 4 || report.Chunks != len(chunks) || report.Replaced != 0 || !slices.Equal(report.Skipped, []string{"notes/empty.md"}) {
		t.Errorf("report = %+v with %d chunks stored", report, len(chunks))
	}
	t.Run("metadata: title, source, chunk index and count", func(t *testing.T) {
		guide := groups["guide.md"]
		if len(guide) != 1 {
			t.Fatalf("guide.md has %d chunks", len(guide))
		}
		f := guide[0].GetMetadata().GetFields()
		if f[memory.MetaTitle].GetStringValue() != "Deploying agentmesh" || f[memory.MetaChunk].GetNumberValue() != 0 || f[memory.MetaChunks].GetNumberValue() != 1 {
			t.Errorf("guide.md metadata = %v", f)
		}
		if faq := groups["notes/faq.txt"]; len(faq) != 1 || faq[0].GetMetadata().GetFields()[memory.MetaTitle].GetStringValue() != "faq.txt" ||
			faq[0].GetContent() != "Backups run nightly at 02:00.\n\nThey are kept for thirty days." {
			t.Errorf("faq.txt = %v", faq)
		}
	})
	t.Run("a long document is split at paragraphs within the limit", func(t *testing.T) {
		handbook := groups["notes/handbook.MD"]
		if len(handbook) < 3 {
			t.Fatalf("handbook has %d chunks", len(handbook))
		}
		var text []string
		for i, m := range handbook {
			f := m.GetMetadata().GetFields()
			if len(m.GetContent()) > memory.MaxChunkBytes {
				t.Errorf("chunk %d has %d bytes", i, len(m.GetContent()))
			}
			if f[memory.MetaTitle].GetStringValue() != "Operations handbook" || int(f[memory.MetaChunk].GetNumberValue()) != i || int(f[memory.MetaChunks].GetNumberValue()) != len(handbook) {
				t.Errorf("chunk %d metadata = %v", i, f)
			}
			if !strings.HasSuffix(m.GetContent(), ".") {
				t.Errorf("chunk %d does not end at a paragraph: ...%q", i, m.GetContent()[len(m.GetContent())-20:])
			}
			text = append(text, m.GetContent())
		}
		if got, want := strings.Fields(strings.Join(text, " ")), strings.Fields(long.String()); !slices.Equal(got, want) {
			t.Errorf("the chunks hold %d words, the file %d", len(got), len(want))
		}
	})
	t.Run("chunks are searchable in the collection only", func(t *testing.T) {
		resp, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "alice", Collection: "knowledge", Query: "how long are backups kept?"})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetHits()) == 0 || resp.GetHits()[0].GetMemory().GetMetadata().GetFields()[memory.MetaSource].GetStringValue() != "notes/faq.txt" {
			t.Errorf("hits = %v", resp.GetHits())
		}
		if got := listAll(t, c, "alice", ""); len(got) != 0 {
			t.Errorf("personal memory holds %d chunks", len(got))
		}
	})
	t.Run("ingesting again replaces the chunks of each file", func(t *testing.T) {
		writeFiles(t, dir, map[string]string{"notes/faq.txt": "Backups now run hourly."})
		again, err := memory.IngestDir(ctx, c, "alice", "knowledge", dir)
		if err != nil {
			t.Fatal(err)
		}
		after := listAll(t, c, "alice", "knowledge")
		if len(after) != len(chunks) || again.Replaced != len(chunks) || again.Chunks != len(chunks) {
			t.Errorf("after re-ingesting: %d chunks stored (was %d), report %+v", len(after), len(chunks), again)
		}
		if faq := bySource(after)["notes/faq.txt"]; len(faq) != 1 || faq[0].GetContent() != "Backups now run hourly." {
			t.Errorf("faq.txt = %v", faq)
		}
	})
	t.Run("another user's collection is untouched", func(t *testing.T) {
		if got := listAll(t, c, "bob", "knowledge"); len(got) != 0 {
			t.Errorf("bob has %d chunks", len(got))
		}
	})
}

// A full quota stops the ingestion with MEMORY_FULL naming the file, keeping what was stored.
func TestIngestDirQuota(t *testing.T) {
	c := newClient(t, memory.Options{QuotaPerUser: 2})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.md": "first", "b.md": "second", "c.md": "third"})
	report, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir)
	if stageerr.FromError(err).Code != typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL || !strings.Contains(err.Error(), "c.md") {
		t.Fatalf("err = %v, want MEMORY_FULL naming c.md", err)
	}
	if report.Files != 2 || report.Chunks != 2 {
		t.Errorf("report = %+v, want the 2 files stored before the quota", report)
	}
}

func TestIngestDirInvalid(t *testing.T) {
	c := newClient(t, memory.Options{})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"file.md": "text"})
	table := []struct {
		name, user, dir, want string
	}{
		{"no user", "", dir, "user id is empty"},
		{"missing folder", "alice", filepath.Join(dir, "missing"), "no such file or directory"},
		{"a file, not a folder", "alice", filepath.Join(dir, "file.md"), "is not a directory"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := memory.IngestDir(t.Context(), c, tc.user, "knowledge", tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// Text that is not valid UTF-8 (e.g. Latin-1) is stored with U+FFFD in place of bad bytes.
func TestIngestDirInvalidUTF8(t *testing.T) {
	c := newClient(t, memory.Options{})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"latin1.txt": "caf\xe9 au lait"})
	if _, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir); err != nil {
		t.Fatal(err)
	}
	if got := listAll(t, c, "alice", "knowledge"); len(got) != 1 || got[0].GetContent() != "caf\uFFFD au lait" {
		t.Errorf("stored %v", got)
	}
}

// TestIngestDirTwoFoldersOneCollection: two folders holding a file of the same relative path
// (two products' docs, each with its guide.md) ingested into one collection, the one
// knowledge_search reads, are both kept: re-ingesting replaces the chunks of the folder
// ingested again only, whether it is named directly or through a link. The second folder's
// guide.md replaced the first's, silently: the collection lost a document.
func TestIngestDirTwoFoldersOneCollection(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	a, b := t.TempDir(), t.TempDir()
	writeFiles(t, a, map[string]string{"guide.md": "# Alpha guide\n\nAlpha deploys with helm."})
	writeFiles(t, b, map[string]string{"guide.md": "# Beta guide\n\nBeta deploys with terraform."})
	ingest := func(dir string) memory.IngestReport {
		t.Helper()
		report, err := memory.IngestDir(ctx, c, "alice", "knowledge", dir)
		if err != nil {
			t.Fatal(err)
		}
		return report
	}
	contents := func() []string {
		t.Helper()
		var out []string
		for _, m := range listAll(t, c, "alice", "knowledge") {
			out = append(out, m.GetContent())
		}
		slices.Sort(out)
		return out
	}

	ingest(a)
	if r := ingest(b); r.Replaced != 0 || r.Chunks != 1 {
		t.Errorf("ingesting the second folder: report %+v, want 1 chunk stored and none replaced", r)
	}
	const beta = "# Beta guide\n\nBeta deploys with terraform."
	want := []string{"# Alpha guide\n\nAlpha deploys with helm.", beta}
	if got := contents(); !slices.Equal(got, want) {
		t.Fatalf("the collection holds %q, want both guides %q", got, want)
	}

	writeFiles(t, a, map[string]string{"guide.md": "# Alpha guide\n\nAlpha deploys with kustomize."})
	link := filepath.Join(t.TempDir(), "alpha")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	if r := ingest(link); r.Replaced != 1 || r.Chunks != 1 {
		t.Errorf("ingesting the first folder again, through a link: report %+v, want 1 replaced", r)
	}
	want = []string{"# Alpha guide\n\nAlpha deploys with kustomize.", beta}
	if got := contents(); !slices.Equal(got, want) {
		t.Errorf("after re-ingesting the first folder the collection holds %q, want %q", got, want)
	}
}

// TestIngestDirFolderMoved: a folder is known by its name, not where it is: ingested again
// from another place (a fresh checkout in a new temporary directory, another machine), it
// replaces its chunks. Known by its absolute path, every checkout added the whole folder again.
func TestIngestDirFolderMoved(t *testing.T) {
	c := newClient(t, memory.Options{})
	first, second := filepath.Join(t.TempDir(), "docs"), filepath.Join(t.TempDir(), "docs")
	writeFiles(t, first, map[string]string{"guide.md": "Deploy with helm."})
	writeFiles(t, second, map[string]string{"guide.md": "Deploy with kustomize."})
	for _, dir := range []string{first, second} {
		if _, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, m := range listAll(t, c, "alice", "knowledge") {
		got = append(got, m.GetContent())
	}
	if want := []string{"Deploy with kustomize."}; !slices.Equal(got, want) {
		t.Errorf("the collection holds %q, want %q", got, want)
	}
}

// TestIngestDirRemovedFile: a file removed from a folder since it was ingested leaves the
// collection when the folder is ingested again, so knowledge_search no longer answers from a
// document its owner deleted; the same path from another folder stays. Its chunks stayed, for
// ever found.
func TestIngestDirRemovedFile(t *testing.T) {
	c := newClient(t, memory.Options{})
	ctx := t.Context()
	a, b := t.TempDir(), t.TempDir()
	writeFiles(t, a, map[string]string{"old.md": "The old procedure uses ftp.",
		"kept.md": "Kept text.", "a/b.md": "Nested text.", "a.md": "Top text."})
	writeFiles(t, b, map[string]string{"old.md": "Another folder's old.md stays."})
	for _, dir := range []string{a, b} {
		if _, err := memory.IngestDir(ctx, c, "alice", "knowledge", dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(a, "old.md")); err != nil {
		t.Fatal(err)
	}
	report, err := memory.IngestDir(ctx, c, "alice", "knowledge", a)
	if err != nil {
		t.Fatal(err)
	}
	if report.Removed != 1 || report.Replaced != 3 || report.Files != 3 {
		t.Errorf("report %+v, want 3 files replaced and old.md's chunk removed", report)
	}
	var got []string
	for _, m := range listAll(t, c, "alice", "knowledge") {
		got = append(got, m.GetContent())
	}
	slices.Sort(got)
	want := []string{"Another folder's old.md stays.", "Kept text.", "Nested text.", "Top text."}
	if !slices.Equal(got, want) {
		t.Errorf("the collection holds %q, want %q", got, want)
	}
}

// TestIngestDirNamesNotUTF8: a folder or file whose name is not valid UTF-8 (Latin-1 names
// on Linux) is ingested, its names in the metadata with U+FFFD in place of the bad bytes, and
// ingested again it replaces its chunks. Metadata strings must be UTF-8: each Store failed,
// and the ingestion stopped at the first such file, or at once for such a folder.
func TestIngestDirNamesNotUTF8(t *testing.T) {
	c := newClient(t, memory.Options{})
	dir := filepath.Join(t.TempDir(), "caf\xe9")
	writeFiles(t, dir, map[string]string{"r\xe9sum\xe9.txt": "Latin-1 named file.", "b.md": "Plain."})
	for range 2 {
		if _, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir); err != nil {
			t.Fatal(err)
		}
	}
	got := bySource(listAll(t, c, "alice", "knowledge"))
	sources := slices.Sorted(maps.Keys(got))
	if want := []string{"b.md", "r\uFFFDsum\uFFFD.txt"}; !slices.Equal(sources, want) {
		t.Errorf("sources %q, want %q", sources, want)
	}
	for src, chunks := range got {
		if len(chunks) != 1 {
			t.Errorf("%s has %d chunks after ingesting twice, want 1", src, len(chunks))
		}
	}
}

// earlierStage is a memory client of a memory stage of an earlier release, without
// StoreDocument (UNIMPLEMENTED, as gRPC answers a method the server lacks).
type earlierStage struct{ memoryv1.MemoryServiceClient }

func (earlierStage) StoreDocument(context.Context, *memoryv1.StoreDocumentRequest,
	...grpc.CallOption) (*memoryv1.StoreDocumentResponse, error) {
	return nil, status.Error(codes.Unimplemented,
		"unknown method StoreDocument for service agentmesh.memory.v1.MemoryService")
}

// failingStores is a memory client of a memory stage of an earlier release (earlierStage),
// which IngestDir sends the chunks one by one, whose Store calls fail, UNAVAILABLE, from the
// after-th on.
type failingStores struct {
	memoryv1.MemoryServiceClient
	after, calls int
}

func (f *failingStores) StoreDocument(ctx context.Context, req *memoryv1.StoreDocumentRequest,
	opts ...grpc.CallOption) (*memoryv1.StoreDocumentResponse, error) {
	return earlierStage{}.StoreDocument(ctx, req, opts...)
}

func (f *failingStores) Store(ctx context.Context, req *memoryv1.StoreRequest,
	opts ...grpc.CallOption) (*memoryv1.StoreResponse, error) {
	if f.calls++; f.calls >= f.after {
		return nil, status.Error(codes.Unavailable, "the memory stage went away")
	}
	return f.MemoryServiceClient.Store(ctx, req, opts...)
}

// paragraphs is a document of n chunks, each a paragraph of about MaxChunkBytes naming word.
func paragraphs(n int, word string) string {
	p := make([]string, n)
	for i := range p {
		p[i] = strings.Repeat(word+" ", memory.MaxChunkBytes/len(word+" ")-1)
	}
	return strings.Join(p, "\n\n")
}

// TestIngestDirFailureKeepsTheEarlierChunks: an ingestion that fails while it stores a
// changed file's chunks leaves the file's earlier chunks as they were, and none of its new
// ones. The earlier chunks were deleted first, so the document was missing from the
// collection (or half there) until the ingestion was run again.
func TestIngestDirFailureKeepsTheEarlierChunks(t *testing.T) {
	c := newClient(t, memory.Options{})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.md": paragraphs(3, "before")})
	if _, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir); err != nil {
		t.Fatal(err)
	}
	before := listAll(t, c, "alice", "knowledge")
	writeFiles(t, dir, map[string]string{"a.md": paragraphs(3, "after")})
	_, err := memory.IngestDir(t.Context(), &failingStores{MemoryServiceClient: c, after: 2}, "alice", "knowledge", dir)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "a.md") {
		t.Fatalf("err = %v, want UNAVAILABLE naming a.md", err)
	}
	var got, want []string
	for _, m := range listAll(t, c, "alice", "knowledge") {
		got = append(got, m.GetId()+" "+m.GetContent())
	}
	for _, m := range before {
		want = append(want, m.GetId()+" "+m.GetContent())
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) != 3 || !slices.Equal(got, want) {
		t.Errorf("after the failure the collection holds %d chunks, want the 3 earlier ones: %.200q", len(got), got)
	}
}

// TestIngestDirQuotaLeavesNoRoomForBoth: a changed file whose new chunks do not fit beside its
// earlier ones under the quota still replaces them, as when the earlier were deleted first.
func TestIngestDirQuotaLeavesNoRoomForBoth(t *testing.T) {
	c := newClient(t, memory.Options{QuotaPerUser: 4})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.md": paragraphs(3, "before")})
	if _, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"a.md": paragraphs(3, "after")})
	report, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir)
	if err != nil {
		t.Fatal(err)
	}
	chunks := listAll(t, c, "alice", "knowledge")
	if len(chunks) != 3 || report.Chunks != 3 || report.Replaced != 3 {
		t.Fatalf("%d chunks stored, report %+v; want the 3 new ones replacing the 3 earlier", len(chunks), report)
	}
	for _, m := range chunks {
		if !strings.HasPrefix(m.GetContent(), "after ") {
			t.Errorf("chunk %.40q is not the new text's", m.GetContent())
		}
	}
}

// A Markdown file whose first heading is longer than a title may be is stored with the
// heading cut to memory.MaxTitleBytes as its title: every chunk carries the title in its
// metadata, and a heading over MaxMetadataBytes made each chunk INVALID_ARGUMENT, which
// stopped the ingestion at that file.
func TestIngestDirLongHeading(t *testing.T) {
	c := newClient(t, memory.Options{})
	dir := t.TempDir()
	heading := strings.Repeat("é", memory.MaxMetadataBytes)
	writeFiles(t, dir, map[string]string{
		"long.md": "# " + heading + "\n\nThe body.",
		"next.md": "after it",
	})
	report, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir)
	if err != nil {
		t.Fatalf("IngestDir: %v", err)
	}
	if report.Files != 2 {
		t.Errorf("report = %+v, want both files stored", report)
	}
	chunks := bySource(listAll(t, c, "alice", "knowledge"))["long.md"]
	if len(chunks) == 0 {
		t.Fatal("no chunk of long.md stored")
	}
	for _, m := range chunks {
		title := m.GetMetadata().GetFields()[memory.MetaTitle].GetStringValue()
		cut := strings.TrimSuffix(title, "…")
		if len(title) > memory.MaxTitleBytes || cut == title || cut == "" ||
			!strings.HasPrefix(heading, cut) {
			t.Errorf("title of %d bytes (%.20q…), want the heading cut to %d bytes, marked …",
				len(title), title, memory.MaxTitleBytes)
		}
	}
}

// TestIngestDirFailureKeepsTheUnchangedChunks: an ingestion that fails while it stores a file
// whose first chunks are unchanged leaves the file's chunks as they were, through the gRPC
// API on each store. Storing an unchanged chunk replaces the earlier one (the same document
// key), and undoing the failed ingestion deleted the new chunk too, so the chunk was lost.
func TestIngestDirFailureKeepsTheUnchangedChunks(t *testing.T) {
	onStores(t, everyStore, func(t *testing.T, s memory.Store) {
		c := newClient(t, memory.Options{Store: s})
		dir := t.TempDir()
		same := paragraphs(2, "same")
		writeFiles(t, dir, map[string]string{"a.md": same + "\n\n" + paragraphs(1, "before")})
		if _, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir); err != nil {
			t.Fatal(err)
		}
		contents := func() []string {
			var out []string
			for _, m := range listAll(t, c, "alice", "knowledge") {
				out = append(out, m.GetContent())
			}
			slices.Sort(out)
			return out
		}
		want := contents()
		writeFiles(t, dir, map[string]string{"a.md": same + "\n\n" + paragraphs(1, "after")})
		failing := &failingStores{MemoryServiceClient: c, after: 3}
		_, err := memory.IngestDir(t.Context(), failing, "alice", "knowledge", dir)
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v, want UNAVAILABLE", err)
		}
		if got := contents(); len(want) != 3 || !slices.Equal(got, want) {
			t.Errorf("after the failure the collection holds %d chunks, want the 3 earlier "+
				"ones: %.200q", len(got), got)
		}
	})
}

// TestIngestDirEarlierMemoryStage: a memory stage of an earlier release, without StoreDocument,
// is sent a file's chunks one by one: the folder is ingested, and ingested again after a change
// its file's chunks are replaced.
func TestIngestDirEarlierMemoryStage(t *testing.T) {
	c := earlierStage{newClient(t, memory.Options{})}
	dir := t.TempDir()
	for i, word := range []string{"before", "after"} {
		writeFiles(t, dir, map[string]string{"a.md": paragraphs(3, word), "b.md": "Kept."})
		report, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir)
		if err != nil {
			t.Fatal(err)
		}
		if report.Files != 2 || report.Chunks != 4 || report.Replaced != 4*i {
			t.Errorf("ingestion %d: report %+v, want 2 files of 4 chunks, %d replaced", i+1,
				report, 4*i)
		}
		chunks := bySource(listAll(t, c, "alice", "knowledge"))["a.md"]
		if len(chunks) != 3 || !strings.HasPrefix(chunks[0].GetContent(), word+" ") {
			t.Errorf("ingestion %d: a.md has %d chunks, want the 3 of the text %q", i+1,
				len(chunks), word)
		}
	}
}

// failingDocuments is a memory client whose StoreDocument calls fail, UNAVAILABLE.
type failingDocuments struct{ memoryv1.MemoryServiceClient }

func (failingDocuments) StoreDocument(context.Context, *memoryv1.StoreDocumentRequest,
	...grpc.CallOption) (*memoryv1.StoreDocumentResponse, error) {
	return nil, status.Error(codes.Unavailable, "the memory stage went away")
}

// TestIngestDirStoreDocumentFails: an ingestion whose StoreDocument of a changed file fails
// leaves the file's earlier chunks as they were (the memory stage replaces them as a unit, or
// not at all), and deletes none of them.
func TestIngestDirStoreDocumentFails(t *testing.T) {
	c := newClient(t, memory.Options{})
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.md": paragraphs(3, "before")})
	if _, err := memory.IngestDir(t.Context(), c, "alice", "knowledge", dir); err != nil {
		t.Fatal(err)
	}
	ids := func() []string {
		var out []string
		for _, m := range listAll(t, c, "alice", "knowledge") {
			out = append(out, m.GetId())
		}
		return out
	}
	before := ids()
	writeFiles(t, dir, map[string]string{"a.md": paragraphs(3, "after")})
	_, err := memory.IngestDir(t.Context(), failingDocuments{c}, "alice", "knowledge", dir)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "a.md") {
		t.Fatalf("err = %v, want UNAVAILABLE naming a.md", err)
	}
	if got := ids(); len(before) != 3 || !slices.Equal(got, before) {
		t.Errorf("after the failure the collection holds %v, want the 3 earlier chunks %v",
			got, before)
	}
}

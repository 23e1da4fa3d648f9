package memory_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentmesh/agentmesh/services/memory"
)

// TestIngestDirConcurrent: two ingestions of the same folder for the same user at the same
// time, through the gRPC API on each SQL store, end with one set of chunks, also when the
// folder was ingested before and a file has changed since. Each listed the collection and
// then stored its chunks, so both sets stayed.
func TestIngestDirConcurrent(t *testing.T) {
	onStores(t, sqlStores, func(t *testing.T, s memory.Store) {
		c := newClient(t, memory.Options{Store: s})
		dir := t.TempDir()
		files := map[string]string{
			"a.md": paragraphs(3, "alpha"), "b/c.txt": "Gamma.", "d.md": paragraphs(2, "delta"),
		}
		want := func() []string {
			var want []string
			for _, text := range files {
				want = append(want, splitChunks(text)...)
			}
			slices.Sort(want)
			return want
		}
		ingestTwice := func(round string) {
			writeFiles(t, dir, files)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range errs {
				wg.Go(func() {
					_, errs[i] = memory.IngestDir(t.Context(), c, "alice", "knowledge", dir)
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("%s: %v", round, err)
				}
			}
			var got []string
			for _, m := range listAll(t, c, "alice", "knowledge") {
				got = append(got, m.GetContent())
			}
			slices.Sort(got)
			if w := want(); !slices.Equal(got, w) {
				t.Fatalf("%s: the collection holds %d chunks, want the %d of the folder",
					round, len(got), len(w))
			}
		}
		ingestTwice("first ingestion")
		files["b/c.txt"] = "Gamma, changed."
		ingestTwice("after a change")
		ingestTwice("unchanged")
	})
}

// TestIngestDirConcurrentVersions: two ingestions of a file that changed between them (two
// checkouts of one folder, each with its version of the file) at the same time, through the
// gRPC API on each store, round after round, leave the chunks of one version: the one stored
// last, never some of each. Each stored its chunks and then deleted those it had listed
// before, so both versions stayed until the next ingestion.
func TestIngestDirConcurrentVersions(t *testing.T) {
	onStores(t, everyStore, func(t *testing.T, s memory.Store) {
		c := newClient(t, memory.Options{Store: s})
		const rounds, chunks = 5, 4
		for round := range rounds {
			dirs := make([]string, 2)
			versions := make([][]string, 2)
			for v := range dirs {
				dirs[v] = filepath.Join(t.TempDir(), "docs")
				text := paragraphs(chunks, fmt.Sprintf("round%dversion%d", round, v))
				writeFiles(t, dirs[v], map[string]string{"guide.md": text})
				versions[v] = splitChunks(text)
				slices.Sort(versions[v])
			}
			var wg sync.WaitGroup
			errs := make([]error, len(dirs))
			for v, dir := range dirs {
				wg.Go(func() {
					_, errs[v] = memory.IngestDir(t.Context(), c, "alice", "knowledge", dir)
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			var got []string
			of := make([]int, len(versions))
			for _, m := range listAll(t, c, "alice", "knowledge") {
				got = append(got, m.GetContent())
				for v := range versions {
					if slices.Contains(versions[v], m.GetContent()) {
						of[v]++
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, versions[0]) && !slices.Equal(got, versions[1]) {
				t.Fatalf("round %d: the collection holds %d chunks, %d of one version and %d of "+
					"the other, want the %d of one version", round, len(got), of[0], of[1], chunks)
			}
		}
	})
}

// splitChunks returns the paragraphs of text, each a chunk of paragraphs' output.
func splitChunks(text string) []string {
	var chunks []string
	for p := range strings.SplitSeq(text, "\n\n") {
		chunks = append(chunks, strings.TrimSpace(p))
	}
	return chunks
}

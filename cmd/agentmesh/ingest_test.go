package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// startMesh starts the whole mesh in process on ephemeral ports until the test ends.
func startMesh(t *testing.T, cfg *config.Config) *mesh.Mesh {
	t.Helper()
	m, err := mesh.Start(t.Context(), mesh.Options{Config: cfg, Ephemeral: true, StoreDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("start the mesh: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

// dialService opens a client connection to addr until the test ends.
func dialService(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// writeFiles writes files (name → content) into a new temporary directory and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// docs is a folder of two Markdown files and one without text.
var docs = map[string]string{
	"retries.md": "# Retry policy\n\nFailed calls are retried with exponential backoff and jitter.\n",
	"deploy.md":  "# Deployment guide\n\nStages roll out one at a time behind a health check.\n",
	"empty.txt":  "  \n",
}

// runCLI runs the CLI with args and fails the test unless it exits with want.
func runCLI(t *testing.T, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if got := run(t.Context(), args, &out, &errOut); got != want {
		t.Fatalf("agentmesh %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, want, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// toolResults returns the contents of the tool messages of a run's conversation.
func toolResults(result *typev1.RunResult) []string {
	var out []string
	for _, m := range result.GetConversation() {
		if m.GetRole() == typev1.Role_ROLE_TOOL {
			out = append(out, m.GetContent())
		}
	}
	return out
}

// TestIngest: a folder ingested with the CLI is what knowledge_search finds in a run through
// the public API, with the rules model; a word the folder lacks gets the empty sentinel. The
// memory address comes from --addr, then $AGENTMESH_MEMORY_ADDR, then the configuration.
func TestIngest(t *testing.T) {
	isolate(t)
	m := startMesh(t, config.Default())
	memAddr := m.Addr(mesh.Memory)
	dir := writeFiles(t, docs)

	stdout, _ := runCLI(t, exitcode.OK, "ingest", "--addr", memAddr, dir)
	want := fmt.Sprintf("ingested %s into collection \"knowledge\" of user \"cli\": 2 file(s), 2 chunk(s) stored, 0 earlier chunk(s) replaced\nskipped (no text): empty.txt\n", dir)
	if stdout != want {
		t.Errorf("ingest printed %q, want %q", stdout, want)
	}

	client := agentv1.NewAgentServiceClient(dialService(t, m.Addr(mesh.Orchestrator)))
	// The rules model quotes what it found, and says seed 002's sentence when it found nothing.
	const refusal = "I don't have enough information in the current documentation to answer that."
	table := []struct {
		message, want, answer string
	}{
		{"search the docs for jitter", "[1] Retry policy — retries.md (score 1.00)\n# Retry policy\n\nFailed calls are retried with exponential backoff and jitter.", ""},
		{"search the docs for kubernetes", action.EmptySearchResult, refusal},
	}
	for _, tc := range table {
		t.Run(tc.message, func(t *testing.T) {
			// The CLI's user: `agentmesh run` and `agentmesh ingest` both default to "cli".
			result, err := client.Run(t.Context(), &agentv1.RunRequest{Message: tc.message, UserId: "cli"})
			if err != nil {
				t.Fatal(err)
			}
			if got := toolResults(result); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("tool results %q, want [%q] (outcome %v)", got, tc.want, result.GetOutcome())
			}
			if answer := cmp.Or(tc.answer, tc.want); !strings.Contains(result.GetFinalReport().GetContent(), answer) {
				t.Errorf("answer %q does not say %q", result.GetFinalReport().GetContent(), answer)
			}
		})
	}

	// `agentmesh run` runs as "cli" too, without credentials, so it finds what ingest stored;
	// --user runs as another user, whose knowledge is empty.
	t.Run("agentmesh run", func(t *testing.T) {
		orch := m.Addr(mesh.Orchestrator)
		out, _ := runCLI(t, exitcode.OK, "run", "--addr", orch, "search the docs for jitter")
		if !strings.Contains(out, "jitter") {
			t.Errorf("agentmesh run answered %q, want the retry policy it found", out)
		}
		out, _ = runCLI(t, exitcode.OK, "run", "--addr", orch, "--user", "erin",
			"search the docs for jitter")
		if !strings.Contains(out, refusal) {
			t.Errorf("agentmesh run --user erin answered %q, want %q", out, refusal)
		}
	})
	t.Run("address from the environment", func(t *testing.T) {
		t.Setenv("AGENTMESH_MEMORY_ADDR", memAddr)
		stdout, _ := runCLI(t, exitcode.OK, "ingest", dir)
		if !strings.Contains(stdout, "2 file(s), 2 chunk(s) stored, 2 earlier chunk(s) replaced") {
			t.Errorf("re-ingesting printed %q, want the earlier chunks replaced", stdout)
		}
	})
	t.Run("address from the configuration", func(t *testing.T) {
		t.Setenv("AGENTMESH_MEMORY_ADDR", "")
		if err := os.WriteFile(config.FileName, fmt.Appendf(nil, "services:\n  memory: %q\n", memAddr), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(config.FileName) })
		stdout, _ := runCLI(t, exitcode.OK, "ingest", "--user", "bob", "--collection", "notes", dir)
		if !strings.HasSuffix(strings.SplitN(stdout, "\n", 2)[0], `into collection "notes" of user "bob": 2 file(s), 2 chunk(s) stored, 0 earlier chunk(s) replaced`) {
			t.Errorf("ingest printed %q", stdout)
		}
	})
	// The configuration is found as `agentmesh conformance` finds it: --config, else
	// $AGENTMESH_CONFIG, over the standard layers. Ingest ignored both and dialled the
	// default 127.0.0.1:7007.
	path := filepath.Join(t.TempDir(), "deployed.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, "services:\n  memory: %q\n", memAddr), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("address from $AGENTMESH_CONFIG", func(t *testing.T) {
		t.Setenv("AGENTMESH_MEMORY_ADDR", "")
		t.Setenv("AGENTMESH_CONFIG", path)
		stdout, _ := runCLI(t, exitcode.OK, "ingest", "--user", "carol", dir)
		if !strings.HasSuffix(strings.SplitN(stdout, "\n", 2)[0], `of user "carol": 2 file(s), 2 chunk(s) stored, 0 earlier chunk(s) replaced`) {
			t.Errorf("ingest printed %q", stdout)
		}
	})
	t.Run("address from --config", func(t *testing.T) {
		t.Setenv("AGENTMESH_MEMORY_ADDR", "")
		t.Setenv("AGENTMESH_CONFIG", "")
		stdout, _ := runCLI(t, exitcode.OK, "ingest", "--config", path, "--user", "dave", dir)
		if !strings.HasSuffix(strings.SplitN(stdout, "\n", 2)[0], `of user "dave": 2 file(s), 2 chunk(s) stored, 0 earlier chunk(s) replaced`) {
			t.Errorf("ingest printed %q", stdout)
		}
	})
}

// TestIngestWithAuth (issue 12.4): with API keys configured the memory stage enforces
// isolation, and `agentmesh ingest --user acme/alice` still works: it acts for the user it names.
// Alice's runs find what it stored; bob's find nothing.
func TestIngestWithAuth(t *testing.T) {
	isolate(t)
	aliceKey, aliceHash := auth.NewKey()
	bobKey, bobHash := auth.NewKey()
	cfg := config.Default()
	cfg.Auth.APIKeys = []config.APIKey{{Hash: aliceHash, Tenant: "acme", User: "alice"}, {Hash: bobHash, Tenant: "acme", User: "bob"}}
	m := startMesh(t, cfg)
	dir := writeFiles(t, docs)

	stdout, _ := runCLI(t, exitcode.OK, "ingest", "--addr", m.Addr(mesh.Memory), "--user", "acme/alice", dir)
	if !strings.Contains(stdout, `into collection "knowledge" of user "acme/alice": 2 file(s), 2 chunk(s) stored`) {
		t.Errorf("ingest printed %q", stdout)
	}
	client := agentv1.NewAgentServiceClient(dialService(t, m.Addr(mesh.Orchestrator)))
	for _, tc := range []struct{ who, key, want string }{
		{"alice", aliceKey, "[1] Retry policy — retries.md (score 1.00)\n# Retry policy\n\nFailed calls are retried with exponential backoff and jitter."},
		{"bob", bobKey, action.EmptySearchResult},
	} {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tc.key)
		result, err := client.Run(ctx, &agentv1.RunRequest{Message: "search the docs for jitter"})
		if err != nil {
			t.Fatalf("%s's run: %v", tc.who, err)
		}
		if got := toolResults(result); len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s's tool results %q, want [%q] (outcome %v)", tc.who, got, tc.want, result.GetOutcome())
		}
	}
}

// TestIngestASymlinkedDirectory: a directory named by a symbolic link (a synced or shared
// folder linked into place) is ingested as the directory it names. The CLI took it for a
// directory, the walk did not follow the link, and the command printed "0 file(s)" and exited 0
// having stored nothing.
func TestIngestASymlinkedDirectory(t *testing.T) {
	isolate(t)
	link := filepath.Join(t.TempDir(), "docs")
	if err := os.Symlink(writeFiles(t, docs), link); err != nil {
		t.Fatal(err)
	}
	stdout, _ := runCLI(t, exitcode.OK, "ingest", "--addr", startMesh(t, config.Default()).Addr(mesh.Memory), link)
	if !strings.Contains(stdout, ": 2 file(s), 2 chunk(s) stored, 0 earlier chunk(s) replaced\nskipped (no text): empty.txt\n") {
		t.Errorf("ingest printed %q, want the 2 files of the directory the link names stored", stdout)
	}
}

// TestIngestRemovedFile: ingesting a folder again after a file was deleted from it removes
// that file's chunks, and says so; knowledge_search no longer answers from it.
func TestIngestRemovedFile(t *testing.T) {
	isolate(t)
	addr := startMesh(t, config.Default()).Addr(mesh.Memory)
	dir := writeFiles(t, docs)
	runCLI(t, exitcode.OK, "ingest", "--addr", addr, dir)
	if err := os.Remove(filepath.Join(dir, "retries.md")); err != nil {
		t.Fatal(err)
	}
	stdout, _ := runCLI(t, exitcode.OK, "ingest", "--addr", addr, dir)
	if want := ": 1 file(s), 1 chunk(s) stored, 1 earlier chunk(s) replaced, " +
		"1 chunk(s) of files gone from the folder removed\n"; !strings.Contains(stdout, want) {
		t.Errorf("ingest printed %q, want it to say %q", stdout, want)
	}
}

// TestIngestALargeCollection: ingesting into a collection whose memories fill a page of the
// memory stage's List over gRPC's default 4 MiB works. The CLI listed the collection with
// that default, and such a page failed the ingestion (RESOURCE_EXHAUSTED, "received message
// larger than max"), although the memory stage sends what the mesh's limit allows.
func TestIngestALargeCollection(t *testing.T) {
	isolate(t)
	addr := startMesh(t, config.Default()).Addr(mesh.Memory)
	memories := memoryv1.NewMemoryServiceClient(dialService(t, addr))
	big := strings.Repeat("a large note about the deployment ", memory.MaxContentBytes/40)
	for i := range 160 { // 160 of 27 KiB: over 4 MiB on the one page ingest lists
		_, err := memories.Store(t.Context(), &memoryv1.StoreRequest{UserId: "cli",
			Collection: action.KnowledgeCollection,
			Content:    &typev1.Message{Role: typev1.Role_ROLE_USER, Content: fmt.Sprint(i, big)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	stdout, _ := runCLI(t, exitcode.OK, "ingest", "--addr", addr, writeFiles(t, docs))
	if !strings.Contains(stdout, ": 2 file(s), 2 chunk(s) stored") {
		t.Errorf("ingest printed %q, want the 2 files stored", stdout)
	}
}

func TestIngestExitCodes(t *testing.T) {
	isolate(t)
	dir := writeFiles(t, docs)
	file := filepath.Join(dir, "retries.md")
	missing := filepath.Join(t.TempDir(), "none")

	full := config.Default()
	full.Memory.QuotaPerUser = 1
	fullAddr := startMesh(t, full).Addr(mesh.Memory)

	tests := []struct {
		name   string
		config string // ./agentmesh.yaml
		args   []string
		want   int
		says   []string
	}{
		{"no directory", "", []string{"ingest"}, 4, []string{"ingest takes one directory"}},
		{"two directories", "", []string{"ingest", dir, dir}, 4, []string{"ingest takes one directory"}},
		{"bad flag", "", []string{"ingest", "--bogus", dir}, 4, []string{"bogus"}},
		{"empty user", "", []string{"ingest", "--user", " ", dir}, 4, []string{"--user must not be empty"}},
		// The empty collection is the user's personal memory: the chunks were stored there, shown by
		// `agentmesh memories` and recalled in every conversation, and knowledge_search found none.
		{"empty collection", "", []string{"ingest", "--addr", fullAddr, "--collection", "", dir}, 4, []string{"--collection must name a knowledge collection"}},
		{"missing directory", "", []string{"ingest", "--addr", fullAddr, missing}, 4, []string{missing, "no such file or directory"}},
		{"a file, not a directory", "", []string{"ingest", "--addr", fullAddr, file}, 4, []string{file + " is not a directory"}},
		{"invalid configuration", "targets: [{provider: nope, model: x}]\n", []string{"ingest", dir}, 4, []string{`provider "nope" is not configured`}},
		{"memory unreachable", "", []string{"ingest", "--addr", "127.0.0.1:1", dir}, 3, []string{"cannot reach the memory service at 127.0.0.1:1", "connection refused"}},
		{"memory unreachable, configured address", "services:\n  memory: 127.0.0.1:1\n", []string{"ingest", dir}, 3, []string{"cannot reach the memory service at 127.0.0.1:1"}},
		{"memory full", "", []string{"ingest", "--addr", fullAddr, dir}, 1, []string{
			"before failing: 1 file(s), 1 chunk(s) stored", "MEMORY_FULL", `ingest retries.md: the document's 1 chunk(s) would take user "cli" past its quota of 1 memories`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AGENTMESH_MEMORY_ADDR", "")
			if tc.config != "" {
				if err := os.WriteFile(config.FileName, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = os.Remove(config.FileName) })
			}
			stdout, stderr := runCLI(t, tc.want, tc.args...)
			for _, s := range tc.says {
				if !strings.Contains(stdout+stderr, s) {
					t.Errorf("output lacks %q:\n%s%s", s, stdout, stderr)
				}
			}
		})
	}
}

// ingestError's exit codes and messages, including failures an end-to-end test cannot provoke
// (a file that cannot be read, when tests run as root).
func TestIngestErrorCodes(t *testing.T) {
	memoryFull := stageerr.ToStatus(stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL, `user "u" has 1 of 1 memories`))
	tests := []struct {
		name string
		err  error
		want int
		says string
	}{
		{"unreachable", fmt.Errorf("ingest: %w", status.Error(codes.Unavailable, "connection refused")), exitcode.Unavailable,
			"cannot reach the memory service at 127.0.0.1:7007 (is `agentmesh dev` running? set --addr or AGENTMESH_MEMORY_ADDR): ingest: connection refused"},
		{"memory full", fmt.Errorf("ingest a.md: %w", memoryFull), exitcode.Failed,
			`the memory is full (MEMORY_FULL; raise memory.quota_per_user or delete memories): ingest a.md: user "u" has 1 of 1 memories`},
		{"rejected request", status.Error(codes.InvalidArgument, "user_id must not be empty"), exitcode.Invalid, "user_id must not be empty"},
		{"unreadable file", fmt.Errorf("ingest a.md: %w", &fs.PathError{Op: "open", Path: "a.md", Err: fs.ErrPermission}), exitcode.Invalid,
			"ingest a.md: open a.md: permission denied"},
		{"storage failure", fmt.Errorf("ingest: %w", status.Error(codes.Internal, "disk I/O error")), exitcode.Failed, "ingest: disk I/O error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ingestError("127.0.0.1:7007", tc.err)
			if got := exitcode.Of(err); got != tc.want {
				t.Errorf("exit code %d, want %d", got, tc.want)
			}
			if err.Error() != tc.says {
				t.Errorf("message %q, want %q", err, tc.says)
			}
		})
	}
}

// TestMeshEmbeddings: with memory.embeddings set to the rules provider, the mesh's memory
// service embeds through its generation service and keeps the vectors: a paraphrase finds the
// memory that BM25 alone ranks second, with the semantic score of the stored vector.
func TestMeshEmbeddings(t *testing.T) {
	isolate(t)
	semanticCfg := config.Default()
	semanticCfg.Memory.Embeddings = &config.Target{Provider: "rules", Model: "rules-v1"}
	if err := semanticCfg.Validate(); err != nil {
		t.Fatal(err)
	}
	semanticMesh := startMesh(t, semanticCfg)
	semantic := memoryv1.NewMemoryServiceClient(dialService(t, semanticMesh.Addr(mesh.Memory)))
	lexical := memoryv1.NewMemoryServiceClient(dialService(t, startMesh(t, config.Default()).Addr(mesh.Memory)))

	const (
		retries   = "Failed calls are retried with exponential backoff and jitter."
		questions = "Why? When? How? Who? Where? You decide."
		query     = "when and why do you retry failed calls"
	)
	for _, c := range []memoryv1.MemoryServiceClient{semantic, lexical} {
		for _, text := range []string{retries, questions, "Stages roll out one at a time behind a health check."} {
			if _, err := c.Store(t.Context(), &memoryv1.StoreRequest{UserId: "u", Content: &typev1.Message{Role: typev1.Role_ROLE_USER, Content: text}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	search := func(c memoryv1.MemoryServiceClient) []*memoryv1.MemoryHit {
		resp, err := c.Search(t.Context(), &memoryv1.SearchRequest{UserId: "u", Query: query})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetHits()) == 0 {
			t.Fatalf("no hits for %q", query)
		}
		return resp.GetHits()
	}

	lexicalHits := search(lexical)
	if lexicalHits[0].GetMemory().GetContent() != questions {
		t.Fatalf("BM25 ranks %q first: the case proves nothing", lexicalHits[0].GetMemory().GetContent())
	}
	var lexicalScore float64 // the retry memory's normalised BM25 score
	for _, h := range lexicalHits {
		if h.GetMemory().GetContent() == retries {
			lexicalScore = h.GetRelevanceScore()
		}
	}

	hits := search(semantic)
	if got := hits[0].GetMemory().GetContent(); got != retries {
		t.Fatalf("with embeddings the first hit is %q, want %q", got, retries)
	}
	// The score is SemanticWeight × cosine(query, stored vector) + the rest × BM25: recompute it
	// from the generation service's vectors.
	gen := generationv1.NewGenerationServiceClient(dialService(t, semanticMesh.Addr(mesh.Generation)))
	resp, err := gen.Embed(t.Context(), &generationv1.EmbedRequest{
		Target: &typev1.Target{Provider: "rules", Model: "rules-v1"}, Inputs: []string{query, retries},
	})
	if err != nil {
		t.Fatal(err)
	}
	cos := cosine(resp.GetEmbeddings()[0].GetValues(), resp.GetEmbeddings()[1].GetValues())
	want := memory.SemanticWeight*math.Max(0, cos) + (1-memory.SemanticWeight)*lexicalScore
	if got := hits[0].GetRelevanceScore(); cos <= 0 || math.Abs(got-want) > 1e-6 {
		t.Errorf("score %.6f, want %.6f (cosine %.3f, BM25 %.3f)", got, want, cos, lexicalScore)
	}
}

// cosine is the cosine similarity of two vectors of the same length.
func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

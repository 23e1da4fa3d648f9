package deploy

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// TestBuildContextHoldsTheBuild: docker build -f deploy/Dockerfile . sends the repository's
// root as the build context, less what .dockerignore excludes (matched as BuildKit does, with
// moby/patternmatcher). Everything the build stage copies from the context must be in it: each
// COPY source, and for COPY . . every file go build ./cmd/<service> reads (the Go and embedded
// files of the main modules' packages each binary links, and the modules' go.mod, go.sum,
// go.work and go.work.sum). What the build never reads and may be large or private must not be:
// the Git directory, the tools built into bin/, Node modules, test binaries, and the
// certificates and keys the README has a user create at the root.
func TestBuildContextHoldsTheBuild(t *testing.T) {
	pm := dockerignore(t)
	build := readDockerfile(t)["build"]
	if build == nil {
		t.Fatal("deploy/Dockerfile has no stage build")
	}
	var needed []string
	for _, ins := range build.instructions {
		f := strings.Fields(ins)
		if !strings.EqualFold(f[0], "COPY") || strings.HasPrefix(f[1], "--from") {
			continue
		}
		for _, src := range f[1 : len(f)-1] {
			if strings.HasPrefix(src, "--") {
				continue
			}
			if path.Clean(src) == "." {
				needed = append(needed, buildFiles(t)...)
				continue
			}
			needed = append(needed, path.Clean(src))
		}
	}
	if len(needed) == 0 {
		t.Fatal("the build stage copies nothing from the context")
	}
	for _, file := range needed {
		if excluded(t, pm, file) {
			t.Errorf(".dockerignore excludes %s, which the image's build reads", file)
		}
	}
	for _, file := range []string{
		".git/HEAD", "bin/buf", "services/action/testdata/node_modules/x/package.json",
		"test/node/node_modules/x/package.json", "deploy/deploy.test", "agentmesh",
		"certs/ca-key.pem", "generation-keys.yaml",
	} {
		if !excluded(t, pm, file) {
			t.Errorf(".dockerignore does not exclude %s: the build never reads it, and every build would send it to the daemon", file)
		}
	}
}

// dockerignore returns the matcher of the repository's .dockerignore, failing the test when
// there is none.
func dockerignore(t *testing.T) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatal("no .dockerignore: COPY . . sends the whole working tree (.git, bin/, node_modules) to the daemon")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	return pm
}

// excluded reports whether the matcher excludes file (a slash-separated path from the context's
// root), itself or through one of its directories.
func excluded(t *testing.T, pm *patternmatcher.PatternMatcher, file string) bool {
	t.Helper()
	ex, err := pm.MatchesOrParentMatches(file)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// buildFiles returns the files, relative to the repository's root, that go build reads to build
// every binary of cmd/ as the Dockerfile does (CGO_ENABLED=0): the Go and embedded files of
// each package of the main modules they link, and the modules' files.
func buildFiles(t *testing.T) []string {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "go", "list", "-deps",
		"-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}},{{.}}{{end}}{{range .EmbedFiles}},{{.}}{{end}}{{end}}{{end}}`,
		"./cmd/...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/...: %v", err)
	}
	files := []string{"go.work", "go.work.sum", "go.mod", "go.sum", "gen/go.mod", "gen/go.sum"}
	for line := range strings.Lines(string(out)) {
		parts := strings.Split(strings.TrimSpace(line), ",")
		if parts[0] == "" {
			continue
		}
		dir, err := filepath.Rel(root, parts[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range parts[1:] {
			files = append(files, filepath.ToSlash(filepath.Join(dir, f)))
		}
	}
	if len(files) < 100 {
		t.Fatalf("go list -deps ./cmd/... listed %d files of the main modules, too few to be the binaries'", len(files))
	}
	return files
}

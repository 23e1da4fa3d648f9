package deploy

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// imageStage is a stage of the Dockerfile: its base image and its instructions.
type imageStage struct {
	base         string
	instructions []string
}

// readDockerfile returns the stages of deploy/Dockerfile by name, its instructions joined across
// continued lines.
func readDockerfile(t *testing.T) map[string]*imageStage {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages := map[string]*imageStage{}
	var cur *imageStage
	var line strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if line.Len() == 0 && (text == "" || strings.HasPrefix(text, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(text)
		ins := strings.Fields(line.String())
		line.Reset()
		if strings.EqualFold(ins[0], "FROM") {
			cur = &imageStage{base: ins[1]}
			if len(ins) == 4 && strings.EqualFold(ins[2], "AS") {
				stages[ins[3]] = cur
			}
			continue
		}
		if cur != nil {
			cur.instructions = append(cur.instructions, strings.Join(ins, " "))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// TestImagesTrustThePublicCAs: every image a service runs in (the targets docker-compose.yml
// and the README build: service, action) has the system's CA bundle, which a Go binary
// verifies HTTPS servers with: the providers' APIs for generation, REST tools and remote MCP
// servers for action. distroless/static ships one; the node slim images do not (they install
// ca-certificates to fetch Node, then purge it), so the action stage must install it, or its
// every HTTPS call fails with "x509: certificate signed by unknown authority".
func TestImagesTrustThePublicCAs(t *testing.T) {
	stages := readDockerfile(t)
	for _, target := range []string{"service", "action"} {
		s := stages[target]
		if s == nil {
			t.Errorf("deploy/Dockerfile has no stage %s", target)
			continue
		}
		if strings.HasPrefix(s.base, "gcr.io/distroless/") {
			continue // /etc/ssl/certs/ca-certificates.crt is part of every distroless image
		}
		installed := false
		for _, ins := range s.instructions {
			installed = installed || strings.HasPrefix(ins, "RUN ") && strings.Contains(ins, "install") && strings.Contains(ins, " ca-certificates")
		}
		if !installed {
			t.Errorf("stage %s (FROM %s) installs no ca-certificates: its binary trusts no public CA", target, s.base)
		}
	}
}

// TestActionImageReapsOrphans: the action stage starts stdio MCP servers, often through npx,
// whose children are orphaned when a server is stopped or restarted and handed by the kernel
// to the container's PID 1. A Go binary as PID 1 never waits for processes it did not start,
// so each would stay a zombie, holding a PID, for the pod's life: the action image runs its
// binary under tini, installed with the image, which reaps them and passes signals on.
func TestActionImageReapsOrphans(t *testing.T) {
	s := readDockerfile(t)["action"]
	if s == nil {
		t.Fatal("deploy/Dockerfile has no stage action")
	}
	installed, entrypoint := false, ""
	for _, ins := range s.instructions {
		installed = installed || strings.HasPrefix(ins, "RUN ") && strings.Contains(ins, "install") && strings.Contains(ins, " tini")
		if e, ok := strings.CutPrefix(ins, "ENTRYPOINT "); ok {
			entrypoint = e
		}
	}
	if !installed {
		t.Errorf("stage action (FROM %s) does not install tini", s.base)
	}
	if want := `["/usr/bin/tini", "--", "/usr/local/bin/service"]`; entrypoint != want {
		t.Errorf("stage action's ENTRYPOINT is %s, want %s: the binary as PID 1 leaves orphaned MCP server processes zombies", entrypoint, want)
	}
}

// nodeEndOfLife is when each Node.js LTS line stops getting security fixes
// (https://nodejs.org/en/about/previous-releases).
var nodeEndOfLife = map[string]time.Time{
	"18": time.Date(2025, time.April, 30, 0, 0, 0, 0, time.UTC),
	"20": time.Date(2026, time.April, 30, 0, 0, 0, 0, time.UTC),
	"22": time.Date(2027, time.April, 30, 0, 0, 0, 0, time.UTC),
	"24": time.Date(2028, time.April, 30, 0, 0, 0, 0, time.UTC),
}

// TestActionImageNodeIsSupported: the action image's Node runs the stdio MCP servers, code
// from npm that the mesh's tool calls reach, so it must be an LTS line that still gets
// security fixes. The test fails once the line's end of life passes, as it should: move the
// image to the next LTS line.
func TestActionImageNodeIsSupported(t *testing.T) {
	s := readDockerfile(t)["action"]
	if s == nil {
		t.Fatal("deploy/Dockerfile has no stage action")
	}
	image, tag, _ := strings.Cut(s.base, ":")
	if image != "node" {
		t.Fatalf("stage action is FROM %s, want a node image", s.base)
	}
	major, _, _ := strings.Cut(tag, "-")
	eol, ok := nodeEndOfLife[major]
	switch {
	case !ok:
		t.Errorf("stage action is FROM %s: Node %q is no LTS line this test knows; add its end of life",
			s.base, major)
	case !time.Now().Before(eol):
		t.Errorf("stage action is FROM %s: Node %s reached its end of life on %s and gets no "+
			"security fixes", s.base, major, eol.Format(time.DateOnly))
	}
}

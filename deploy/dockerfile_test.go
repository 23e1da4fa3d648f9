package deploy

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
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

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

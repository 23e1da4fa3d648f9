package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// malformedNATSURLs are NATS URLs that do not parse: a configuration error, whatever the
// network.
var malformedNATSURLs = []string{"nats://[::1", "nats://nats:notaport", "nats://%zz"}

// TestDevRefusesAMalformedNATSURL: `agentmesh dev` with a nats.url that does not parse exits 4
// (a configuration error) naming the URL, as every other bad key does; it exited 3, as a NATS
// server that cannot be reached, so a deployment waited for a server that was never wrong.
func TestDevRefusesAMalformedNATSURL(t *testing.T) {
	isolate(t)
	for _, url := range malformedNATSURLs {
		file := filepath.Join(t.TempDir(), "agentmesh.yaml")
		if err := os.WriteFile(file, []byte("nats:\n  url: \""+url+"\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		args := []string{"dev", "--config", file, "--run", "What is 6 times 7?"}
		code := run(t.Context(), args, &stdout, &stderr)
		if code != exitcode.Invalid || !strings.Contains(stderr.String(), "invalid NATS URL") {
			t.Errorf("nats.url %q: exit %d, want %d naming an invalid NATS URL\n%s",
				url, code, exitcode.Invalid, stderr.String())
		}
	}
}

// TestBinariesRefuseAMalformedNATSURL: the orchestrator and the action stage, the binaries that
// take NATS_URL, exit 4 on one that does not parse, not 3.
func TestBinariesRefuseAMalformedNATSURL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the orchestrator and the action stage binaries")
	}
	isolate(t)
	bin := meshproc.Build(t)
	for _, name := range []string{"orchestrator", "action"} {
		for _, url := range malformedNATSURLs {
			cmd := exec.CommandContext(t.Context(), filepath.Join(bin, name))
			cmd.Env = append(os.Environ(), "NATS_URL="+url, "LISTEN_ADDR=127.0.0.1:0",
				"OTEL_SDK_DISABLED=true", "HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			code := 0
			if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != exitcode.Invalid || !strings.Contains(string(out), "invalid NATS URL") {
				t.Errorf("%s with NATS_URL %q: exit %d, want %d naming an invalid NATS URL\n%s",
					name, url, code, exitcode.Invalid, out)
			}
		}
	}
}

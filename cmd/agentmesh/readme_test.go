package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeFirstOutput returns the output the README shows for its first command: the first
// fenced block of its section "What the first command does".
func readmeFirstOutput(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## What the first command does\n")
	if !ok {
		t.Fatal(`README.md has no section "What the first command does"`)
	}
	_, block, ok := strings.Cut(section, "\n```\n")
	if !ok {
		t.Fatal(`README.md's "What the first command does" shows no output`)
	}
	block, _, _ = strings.Cut(block, "```")
	return block
}

// runLines is the output of a run as a user reads it: the progress from the run's first line
// (▶) to its end (■), then the answer.
func runLines(progress, answer string) string {
	start := strings.Index(progress, "▶ run ")
	end := strings.Index(progress, "■ ")
	if start < 0 || end < start {
		return progress + answer
	}
	end += strings.IndexByte(progress[end:], '\n') + 1
	return progress[start:end] + answer
}

// sameEverywhere replaces in out what differs from run to run: the run's id, its trace, the
// token counts.
func sameEverywhere(out string) string {
	for _, r := range []struct{ re, with string }{
		{`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`, "RUN_ID"},
		{`trace [0-9a-f]{32}`, "trace TRACE_ID"},
		{`[0-9]+ tokens`, "N tokens"},
	} {
		out = regexp.MustCompile(r.re).ReplaceAllString(out, r.with)
	}
	return out
}

// TestREADMEFirstRunOutput: the output the README shows for `agentmesh dev --run "What is 6
// times 7?"` is what a newcomer sees, line for line, but for the run's id, its trace and the
// token counts. The README showed no ▶ line, the first a run prints.
func TestREADMEFirstRunOutput(t *testing.T) {
	readme := readmeFirstOutput(t) // before isolate leaves the repository
	isolate(t)
	var stdout, stderr bytes.Buffer
	args := []string{"dev", "--run", "What is 6 times 7?"}
	if code := run(t.Context(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	got := sameEverywhere(runLines(stderr.String(), stdout.String()))
	if want := sameEverywhere(readme); got != want {
		t.Errorf("README.md shows the first run as\n%s\nwhich reads\n%s\nbut it prints\n%s",
			readme, want, got)
	}
}

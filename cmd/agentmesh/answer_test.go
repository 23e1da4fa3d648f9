package main

import (
	"bytes"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/pkg/config"
)

// TestAnswerFromTheCLI: a run that asks its user a question (here: the calculator's result is
// over an observation limit of 1 byte, so recovery asks how to proceed) says how to answer,
// answer resumes it, and watch follows it to the end.
func TestAnswerFromTheCLI(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.Observation.MaxInputBytes = 1
	m, err := mesh.Start(t.Context(), mesh.Options{Config: cfg, Ephemeral: true, StoreDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	addr := m.Addr(mesh.Orchestrator)
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := cli("run", "--addr", addr, "What is 6 times 7?")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	// The hint names the question, so that an answer given late never answers a later one.
	m1 := regexp.MustCompile(`run (\S+) asks: A tool returned more data than I can read\. How would you like me to proceed\?\nanswer with: agentmesh answer --question (\S+) (\S+) YOUR ANSWER`).FindStringSubmatch(out)
	if m1 == nil || m1[2] != "turn-1" || m1[1] != m1[3] || !strings.Contains(errOut, "? the run asks (question turn-1):") {
		t.Fatalf("run output does not say how to answer:\n%s\n%s", out, errOut)
	}
	runID := m1[1]
	if code, _, errOut := cli("answer", "--addr", addr, runID); code != 4 || !strings.Contains(errOut, "a run id and the answer") {
		t.Errorf("answer without text: exit %d %s", code, errOut)
	}
	// Flags may follow the arguments, as the README writes them (agentmesh answer RUN_ID TEXT
	// [--question ID]): they were taken for words of the answer, and the question unchecked.
	if code, _, errOut := cli("answer", runID, "just", "tell", "me", "--question", "not-the-question", "--addr", addr); code == 0 || !strings.Contains(errOut, "not-the-question") {
		t.Errorf("answer naming another question after the text: exit %d %s", code, errOut)
	}
	if code, out, errOut := cli("answer", "--question", m1[2], runID, "just", "tell", "me", "--addr", addr); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("answer: exit %d\n%s%s", code, out, errOut)
	}
	// Watching a paused run, its follower learns which question to answer.
	if code, _, errOut := cli("watch", runID, "--addr", addr); code != 0 || !strings.Contains(errOut, "! answered: just tell me") ||
		!strings.Contains(errOut, "? the run asks (question turn-1): A tool returned") || !strings.Contains(errOut, "COMPLETED_WITH_TOOLS") {
		t.Fatalf("watch: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := cli("answer", "--addr", addr, runID, "again"); code != 4 || !strings.Contains(errOut, "asks no question") {
		t.Errorf("answering a finished run: exit %d %s", code, errOut)
	}
}

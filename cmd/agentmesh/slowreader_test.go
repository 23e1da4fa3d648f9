package main

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// stalledWriter is a terminal that stops taking the CLI's output (a pager that waits) until
// released: the CLI stops reading its stream meanwhile.
type stalledWriter struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	first    chan string // what the CLI wrote first
	released chan struct{}
}

// Write stalls until released, once it handed on what the CLI wrote first.
func (w *stalledWriter) Write(p []byte) (int, error) {
	select {
	case w.first <- string(p):
	default:
	}
	<-w.released
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// TestRunFollowsOnAStreamItReadTooSlowly: a StreamRun whose client reads its events too slowly
// ends RESOURCE_EXHAUSTED, naming the seq to follow the run on from with WatchRun; `agentmesh
// run`, whose terminal stalled, follows the run on there and prints its answer, as it does for
// a run that moved to another replica. It gave up, exit 1, naming `agentmesh watch --from`.
func TestRunFollowsOnAStreamItReadTooSlowly(t *testing.T) {
	isolate(t)
	const message = "Write at length."
	answer := strings.TrimSpace(strings.Repeat(strings.Repeat("x", 999)+" ", 1000)) // 1 MB
	llm := llmtest.New(t, llmtest.Scenario{Name: "long", Match: message,
		Turns: []llmtest.Turn{{Content: answer}}})
	cfg := scriptedConfig(llm)
	cfg.GRPC.StreamBufferBytes = 64 << 10
	addr := startMesh(t, cfg).Addr("orchestrator")
	client := agentv1.NewAgentServiceClient(dialService(t, addr))

	stderr := &stalledWriter{first: make(chan string, 1), released: make(chan struct{})}
	var stdout bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(t.Context(), []string{"run", "--addr", addr, message}, &stdout, stderr)
	}()
	runID := regexp.MustCompile(`▶ run (\S+) `).FindStringSubmatch(<-stderr.first)
	if runID == nil {
		t.Fatal("the CLI's first output names no run")
	}
	if !poll(t, runTimeout, func() bool {
		_, err := client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID[1]})
		return err == nil
	}) {
		t.Fatal("the run did not finish")
	}
	close(stderr.released)
	if code := <-done; code != 0 || !strings.Contains(stdout.String(), answer[:1000]) {
		errOut := stderr.buf.String()
		t.Errorf("run whose terminal stalled: exit %d, want 0 and the answer\nstderr ends: %s",
			code, errOut[max(0, len(errOut)-600):])
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRunExitCodeOfASchemaFailure (issue 11.7): `agentmesh run --schema` asks for a JSON answer
// matching the schema; a run whose final report fails the schema, also in the final turn it
// gets to fix it, ends FINAL_REPORT_INVALID and exits 5 (seed 000: schema validation
// failures), a valid one exits 0, and a schema file that cannot be used exits 4.
func TestRunExitCodeOfASchemaFailure(t *testing.T) {
	isolate(t)
	report := func(args string) llmtest.Turn {
		return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "final_report", Arguments: args}}}
	}
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "invalid", Match: "answer badly", Turns: []llmtest.Turn{
			report(`{"report_format":"json","content_json":{"answer":"forty-two"}}`),
			report(`{"report_format":"json","content_json":{}}`),
		}},
		llmtest.Scenario{Name: "valid", Match: "answer well", Turns: []llmtest.Turn{
			report(`{"report_format":"json","content_json":{"answer":42}}`),
		}},
	)
	cfg := scriptedConfig(llm)
	addr := startMesh(t, cfg).Addr("orchestrator")
	dir := writeFiles(t, map[string]string{
		"schema.json":  `{"type":"object","properties":{"answer":{"type":"number"}},"required":["answer"]}`,
		"list.json":    `["not", "an", "object"]`,
		"garbage.json": `{"type":`,
	})
	schema := filepath.Join(dir, "schema.json")

	_, errOut := runCLI(t, 5, "run", "--addr", addr, "--schema", schema, "answer badly")
	if !strings.Contains(errOut, "FINAL_REPORT_INVALID") {
		t.Errorf("progress does not show the exit reason:\n%s", errOut)
	}
	// The error's lines stay under its "error:" line: the schema's line ("- at '': missing
	// property 'answer'") stood at the start of a line, apart from the run's end.
	if !strings.Contains(errOut, "  error: content_json does not match the output schema: ") ||
		!strings.Contains(errOut, "\n    - at '': missing property 'answer'\n") {
		t.Errorf("progress does not indent the error's lines under it:\n%s", errOut)
	}
	if out, _ := runCLI(t, 0, "run", "--addr", addr, "--schema", schema, "answer well"); !strings.Contains(out, `"answer":42`) {
		t.Errorf("answer %q", out)
	}
	for _, bad := range []string{"list.json", "garbage.json", "missing.json"} {
		if _, errOut := runCLI(t, 4, "run", "--addr", addr, "--schema", filepath.Join(dir, bad), "answer well"); !strings.Contains(errOut, "--schema") {
			t.Errorf("--schema %s: %s", bad, errOut)
		}
	}
	if n := len(llm.Requests()); n != 3 {
		t.Errorf("%d LLM requests, want 2 for the invalid run and 1 for the valid one", n)
	}
}

// TestRunExitCodeOfAnUnusableContract: a configuration whose model leaves no room for the
// conversation is a configuration error, exit 4, refused when it is loaded and naming the
// model; it loaded, and every run failed its preflight (INVALID_CONTRACT).
func TestRunExitCodeOfAnUnusableContract(t *testing.T) {
	isolate(t)
	tiny := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(tiny, []byte("providers:\n  rules:\n    models:\n      rules-v1: {context_window: 1000}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut := runCLI(t, 4, "dev", "--config", tiny, "--run", "What is 6 times 7?"); !strings.Contains(errOut, "providers.rules.models.rules-v1: a context_window of 1000 leaves no room") {
		t.Errorf("the error does not name the model's window:\n%s", errOut)
	}
}

// TestRunExitCodeOfACycleForbidPairOfNoTool: defaults.cycle_forbid naming a tool the mesh does
// not have (an MCP tool by its name on its server) is a configuration error, exit 4: the run
// ends INVALID_CONTRACT before any LLM call. It ran, exit 0, under a rule that could never
// match a call.
func TestRunExitCodeOfACycleForbidPairOfNoTool(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.Defaults.CycleForbid = [][2]string{{"notes.search", "calculator"}}
	m := startMesh(t, cfg)
	if _, errOut := runCLI(t, 4, "run", "--addr", m.Addr("orchestrator"), "What is 6 times 7?"); !strings.Contains(errOut, "INVALID_CONTRACT") {
		t.Errorf("the progress does not say INVALID_CONTRACT:\n%s", errOut)
	}
}

// TestRunAndWatchSayWhyARunFailed: the progress of a failed run says why it failed (its
// result's error, seed 000: "Check result.error … for detailed failure reasons"), in `run` as
// in `watch`, and `watch` and `get` of it exit with its exit code. They showed only the
// outcome and the exit reason, INVALID_CONTRACT, and the canned answer; which part of the
// contract no run can use was only in `get`'s JSON.
func TestRunAndWatchSayWhyARunFailed(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.Defaults.CycleForbid = [][2]string{{"notes.search", "calculator"}}
	addr := startMesh(t, cfg).Addr("orchestrator")
	why := `error: cycle_forbid[0] ["notes.search", "calculator"] names tool "notes.search", which is not available`
	_, errOut := runCLI(t, 4, "run", "--addr", addr, "What is 6 times 7?")
	if !strings.Contains(errOut, why) {
		t.Errorf("run's progress does not say why the run failed (%s):\n%s", why, errOut)
	}
	m := regexp.MustCompile(`▶ run (\S+) `).FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("no run id in the progress:\n%s", errOut)
	}
	// watch and get exit as run does (seed 000: a CLI that exits 0 for a run that failed
	// breaks the contract); they exited 0.
	if _, errOut := runCLI(t, 4, "watch", "--addr", addr, m[1]); !strings.Contains(errOut, why) {
		t.Errorf("watch does not say why the run failed (%s):\n%s", why, errOut)
	}
	if out, _ := runCLI(t, 4, "watch", "--json", "--addr", addr, m[1]); !strings.Contains(out, "runFinished") {
		t.Errorf("watch --json does not print the run's end:\n%s", out)
	}
	if out, errOut := runCLI(t, 4, "get", "--addr", addr, m[1]); !strings.Contains(out, "INVALID_CONTRACT") || errOut != "" {
		t.Errorf("get does not print the result alone:\nstdout: %s\nstderr: %s", out, errOut)
	}
}

// TestRunInterrupted: Ctrl-C (SIGINT, or SIGTERM: main cancels run's context) while `agentmesh
// run` follows a run cancels the run, which would otherwise go on in the mesh unseen, calling
// the model and running tools; the CLI shows how it ended and exits 1 (the run did not
// succeed). It exited 1 with "context canceled" and left the run running.
func TestRunInterrupted(t *testing.T) {
	isolate(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	llm := llmtest.New(t, llmtest.Scenario{Name: "slow", Match: "take your time", Turns: []llmtest.Turn{{Content: "Never sent.", Hold: hold}}})
	cfg := scriptedConfig(llm)
	m := startMesh(t, cfg)
	addr := m.Addr("orchestrator")

	got, stdout, errOut := interruptRun(t, []string{"run", "--addr", addr, "take your time"}, "the run never asked the model",
		func() bool { return len(llm.Requests()) > 0 })
	if got != 1 || !strings.Contains(errOut, "■ INTERRUPTED") || strings.Contains(errOut, "agentmesh: context canceled") {
		t.Errorf("interrupted run: exit %d, want 1 and the run's end\nstdout: %s\nstderr: %s", got, stdout, errOut)
	}
	runID := regexp.MustCompile(`▶ run (\S+) `).FindStringSubmatch(errOut)
	if runID == nil {
		t.Fatalf("no run id in the progress:\n%s", errOut)
	}
	if !strings.Contains(stdout, "The run was cancelled.") {
		t.Errorf("stdout lacks the interrupted run's report: %q", stdout)
	}
	awaitInterrupted(t, agentv1.NewAgentServiceClient(dialService(t, addr)), runID[1])
}

// TestWatchInterrupted: Ctrl-C ends `agentmesh watch`, which only follows the run: the run goes
// on, and the CLI says how to follow it again, exit 0. It printed "agentmesh: context
// canceled" and exited 1, the code of a run that failed.
func TestWatchInterrupted(t *testing.T) {
	isolate(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	llm := llmtest.New(t, llmtest.Scenario{Name: "slow", Match: "take your time", Turns: []llmtest.Turn{{Content: "Done at last.", Hold: hold}}})
	cfg := scriptedConfig(llm)
	addr := startMesh(t, cfg).Addr("orchestrator")
	_, first := startSlowRun(t, addr)
	runID := first.GetRunId()

	ctx, interrupt := context.WithCancel(t.Context())
	var stdout bytes.Buffer
	stderr := &firstWrite{written: make(chan struct{})}
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"watch", runID, "--addr", addr}, &stdout, stderr) }()
	select {
	case <-stderr.written: // watch follows the run
	case <-time.After(30 * time.Second):
		t.Fatal("watch shows nothing")
	}
	interrupt()
	var got int
	select {
	case got = <-code:
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not return after the interrupt")
	}
	if errOut := stderr.String(); got != 0 || strings.Contains(errOut, "context canceled") || !strings.Contains(errOut, "agentmesh watch "+runID+" --from ") {
		t.Errorf("interrupted watch: exit %d, want 0 and how to follow the run again\n%s", got, errOut)
	}
	client := agentv1.NewAgentServiceClient(dialService(t, addr))
	if _, err := client.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("the run does not go on after watch was interrupted: %v", err)
	}
}

// firstWrite is a writer that keeps what is written and closes written at the first write.
type firstWrite struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() == 0 {
		close(w.written)
	}
	return w.b.Write(p)
}

func (w *firstWrite) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// scriptedConfig is the default configuration with one target: model gpt-test of llm, as the
// OpenAI-compatible provider "scripted".
func scriptedConfig(llm *llmtest.Server) *config.Config {
	cfg := config.Default()
	cfg.Providers["scripted"] = config.Provider{Type: "openai", BaseURL: llm.URL(), APIKey: "test-key"}
	cfg.Targets = []config.Target{{Provider: "scripted", Model: "gpt-test"}}
	return cfg
}

// TestCommandsOfAnUnknownRunExit4: a run id (or memory id) the mesh does not know is an invalid
// argument (seed 000: exit 4), the same for every command that takes one, and the error names
// it. They exited 1, the code of a run that failed, as if the run had run and failed.
func TestCommandsOfAnUnknownRunExit4(t *testing.T) {
	isolate(t)
	addr := startMesh(t, config.Default()).Addr("orchestrator")
	const ghost = "no-such-run"
	for _, args := range [][]string{
		{"get", ghost},
		{"watch", ghost},
		{"cancel", ghost},
		{"answer", ghost, "yes"},
		{"approve", ghost, "call-1"},
		{"transcript", "verify", ghost},
		{"memories", "delete", "no-such-memory"},
	} {
		_, errOut := runCLI(t, 4, append(args, "--addr", addr)...)
		if !strings.Contains(errOut, "no-such-") {
			t.Errorf("agentmesh %s: the error does not name the id:\n%s", strings.Join(args, " "), errOut)
		}
	}
}

// TestRunShowsWhyACallWasRefused: the progress line of a refused call keeps the end of a long
// reason, where a final report's schema error says what is wrong (seed 000: "LLM receives error
// message describing validation failure"; its user should see it too). The line was cut at
// 120 characters, inside the schema's name, before the property and the type it wanted.
func TestRunShowsWhyACallWasRefused(t *testing.T) {
	isolate(t)
	report := func(args string) llmtest.Turn {
		return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "final_report", Arguments: args}}}
	}
	llm := llmtest.New(t, llmtest.Scenario{Name: "invalid", Match: "answer badly",
		Turns: []llmtest.Turn{
			report(`{"report_format":"json","content_json":{"answer":"forty-two"}}`),
			report(`{"report_format":"json","content_json":{"answer":42}}`),
		}})
	addr := startMesh(t, scriptedConfig(llm)).Addr("orchestrator")
	dir := writeFiles(t, map[string]string{
		"schema.json": `{"type":"object","properties":{"answer":{"type":"number"}}}`,
	})
	schema := filepath.Join(dir, "schema.json")
	_, errOut := runCLI(t, 0, "run", "--addr", addr, "--schema", schema, "answer badly")
	line := regexp.MustCompile(`(?m)^  ✗ call \S+ \(final_report\) refused: .*$`).FindString(errOut)
	if !strings.Contains(line, "content_json does not match the output schema") ||
		!strings.Contains(line, "/answer") || !strings.Contains(line, "want number") {
		t.Errorf("the refused call's line does not say why:\n%s", errOut)
	}
}

// TestWatchFromPastTheEndOfARun: `agentmesh watch --from SEQ` at or past a finished run's last
// event gets no event (WatchRun ends at once), and says that the run has ended and how, exiting
// with the run's exit code as a watch of the whole run does. It showed nothing and exited 0,
// also for a run that failed. On a live run it waits for the run's end.
func TestWatchFromPastTheEndOfARun(t *testing.T) {
	isolate(t)
	hold := make(chan struct{})
	llm := llmtest.New(t,
		llmtest.Scenario{Name: "quick", Match: "answer at once",
			Turns: []llmtest.Turn{{Content: "Done."}}},
		llmtest.Scenario{Name: "slow", Match: "take your time",
			Turns: []llmtest.Turn{{Content: "Done at last.", Hold: hold}}})
	cfg := scriptedConfig(llm)
	addr := startMesh(t, cfg).Addr("orchestrator")
	for _, tc := range []struct {
		message string
		code    int
		says    string
	}{
		{"answer at once", 0, "■ COMPLETED"},
		{"   ", 1, "EMPTY_INPUT"},
	} {
		_, errOut := runCLI(t, tc.code, "run", "--addr", addr, tc.message)
		runID := regexp.MustCompile(`▶ run (\S+) `).FindStringSubmatch(errOut)
		if runID == nil {
			t.Fatalf("no run id in the progress:\n%s", errOut)
		}
		all, _ := runCLI(t, tc.code, "watch", "--json", runID[1], "--addr", addr)
		last := strings.Count(all, "\n")
		for _, from := range []int{last, last + 100} {
			_, errOut := runCLI(t, tc.code, "watch", runID[1], "--from", strconv.Itoa(from), "--addr", addr)
			if !strings.Contains(errOut, "has ended") || !strings.Contains(errOut, tc.says) {
				t.Errorf("watch --from %d of a run of %d events: the progress does not say the run ended:\n%s",
					from, last, errOut)
			}
			out, _ := runCLI(t, tc.code, "watch", "--json", runID[1], "--from", strconv.Itoa(from),
				"--addr", addr)
			if out != "" {
				t.Errorf("watch --json --from %d printed %q, want no event", from, out)
			}
		}
	}

	_, first := startSlowRun(t, addr)
	code := make(chan int, 1)
	var stdout, stderr bytes.Buffer
	go func() {
		args := []string{"watch", first.GetRunId(), "--from", "1000", "--addr", addr}
		code <- run(t.Context(), args, &stdout, &stderr)
	}()
	close(hold)
	select {
	case got := <-code:
		if got != 0 || !strings.Contains(stderr.String(), "■ COMPLETED") {
			t.Errorf("watch --from past a live run's events: exit %d, want 0 and its end\n%s",
				got, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch --from past a live run's events did not end with the run")
	}
}

// TestGetOfALiveRun: `agentmesh get` of a run that has not ended exits 0, as the README says
// (a paused or live run exits 0), and says how to follow the run. GetRun answers such a run
// FAILED_PRECONDITION, which the CLI took for a failure: exit 1, the code of a run that failed.
func TestGetOfALiveRun(t *testing.T) {
	isolate(t)
	hold, _ := heldTurn(t)
	llm := llmtest.New(t, llmtest.Scenario{Name: "slow", Match: "take your time",
		Turns: []llmtest.Turn{{Content: "Done at last.", Hold: hold}}})
	addr := startMesh(t, scriptedConfig(llm)).Addr("orchestrator")
	_, first := startSlowRun(t, addr)
	runID := first.GetRunId()
	out, errOut := runCLI(t, 0, "get", "--addr", addr, runID)
	if out != "" || !strings.Contains(errOut, "run "+runID+" is still running") ||
		!strings.Contains(errOut, "agentmesh watch "+runID) {
		t.Errorf("get of a live run: stdout %q, stderr %q; want how to follow the run", out, errOut)
	}
}

// startSlowRun starts the run "take your time" of user cli with StreamRun at addr, and returns
// its stream and its first event, which names the run.
func startSlowRun(t *testing.T, addr string,
) (grpc.ServerStreamingClient[eventv1.RunEvent], *eventv1.RunEvent) {
	t.Helper()
	client := agentv1.NewAgentServiceClient(dialService(t, addr))
	stream, err := client.StreamRun(t.Context(),
		&agentv1.RunRequest{Message: "take your time", UserId: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return stream, first
}

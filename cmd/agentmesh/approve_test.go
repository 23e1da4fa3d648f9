package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
)

// TestApproveFromTheCLI: run pauses for approval, approve resumes it, watch follows it to the end.
func TestApproveFromTheCLI(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
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
	m1 := regexp.MustCompile(`run (\S+) is waiting for approval of call (\S+) \(calculator\): agentmesh approve`).FindStringSubmatch(out)
	if m1 == nil {
		t.Fatalf("run output does not say it waits for approval:\n%s", out)
	}
	runID, callID := m1[1], m1[2]
	// With --json, a paused run prints its snapshot as JSON too (issue 11.8).
	code, out, errOut = cli("run", "--addr", addr, "--json", "What is 6 times 7?")
	var snapshot struct {
		Outcome       string `json:"outcome"`
		PendingAction struct {
			ToolCalls []struct{ Name string } `json:"toolCalls"`
		} `json:"pendingAction"`
	}
	if err := json.Unmarshal([]byte(out), &snapshot); code != 0 || err != nil || snapshot.Outcome != "OUTCOME_AWAITING_APPROVAL" ||
		len(snapshot.PendingAction.ToolCalls) != 1 {
		t.Fatalf("run --json of a paused run: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if code, _, errOut := cli("approve", "--addr", addr, "--reject", "--modify", "{}", runID, callID); code != 4 || !strings.Contains(errOut, "not both") {
		t.Errorf("approve --reject --modify: exit %d %s", code, errOut)
	}
	if code, out, errOut := cli("approve", "--addr", addr, "--modify", `{"expression":"2*21"}`, runID, callID); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	// watch shows the decision, as it shows an answer to a question: it showed none.
	code, _, errOut = cli("watch", "--addr", addr, runID)
	if code != 0 || !strings.Contains(errOut, "← calculator: [arguments modified by the user") ||
		!regexp.MustCompile(`\n  ! call `+callID+` approved with arguments \{"expression":\s*"2\*21"\}\n`).MatchString(errOut) {
		t.Fatalf("watch: exit %d\n%s", code, errOut)
	} else if want := "? approval requested for call " + callID + " (calculator)"; !strings.Contains(errOut, want) {
		// Watching a paused run, its follower learns which call to decide.
		t.Errorf("watch does not say %q:\n%s", want, errOut)
	}
	// watch --json prints one JSON event per line, the last one run_finished (issue 11.8).
	code, out, errOut = cli("watch", "--addr", addr, "--json", runID)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var last struct {
		Seq         string          `json:"seq"`
		RunFinished json.RawMessage `json:"runFinished"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); code != 0 || err != nil || last.RunFinished == nil || errOut != "" {
		t.Fatalf("watch --json: exit %d, %v, last line %q, stderr %q", code, err, lines[len(lines)-1], errOut)
	}
	if code, out, _ := cli("get", "--addr", addr, runID); code != 0 || !strings.Contains(out, "OUTCOME_COMPLETED_WITH_TOOLS") {
		t.Errorf("get: exit %d\n%s", code, out)
	}
	if code, _, _ := cli("transcript", "verify", "--addr", addr, runID); code != 0 {
		t.Errorf("transcript verify: exit %d", code)
	}
	if code, _, errOut := cli("approve", "--addr", addr, runID, callID); code != 4 || !strings.Contains(errOut, "has no tool call waiting for approval") {
		t.Errorf("approving a finished run: exit %d %s", code, errOut)
	}
}

// TestRejectFromTheCLIEndsTheRun (issue 11.7): approve --reject --end-run ends the paused run
// USER_REJECTED; --end-run without --reject is invalid (exit 4).
func TestRejectFromTheCLIEndsTheRun(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	addr := startMesh(t, cfg).Addr(mesh.Orchestrator)
	out, _ := runCLI(t, 0, "run", "--addr", addr, "What is 6 times 7?")
	m := regexp.MustCompile(`run (\S+) is waiting for approval of call (\S+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("run output does not say it waits for approval:\n%s", out)
	}
	runID, callID := m[1], m[2]
	if _, errOut := runCLI(t, 4, "approve", "--addr", addr, "--end-run", runID, callID); !strings.Contains(errOut, "--end-run goes with --reject") {
		t.Errorf("approve --end-run: %s", errOut)
	}
	runCLI(t, 0, "approve", "--addr", addr, "--reject", "--end-run", "--feedback", "not today", runID, callID)
	if _, errOut := runCLI(t, 1, "watch", "--addr", addr, runID); !strings.Contains(errOut, "REJECTED USER_REJECTED") ||
		!strings.Contains(errOut, "  ! call "+callID+" rejected, ending the run: not today\n") {
		t.Errorf("watch does not show the rejection and the run ending USER_REJECTED:\n%s", errOut)
	}
	out, _ = runCLI(t, 1, "get", "--addr", addr, runID) // a run that did not succeed, as run exits
	var got struct {
		ExitReason  string                   `json:"exitReason"`
		FinalReport struct{ Content string } `json:"finalReport"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.ExitReason != "USER_REJECTED" ||
		!strings.HasPrefix(got.FinalReport.Content, "The call to calculator was rejected") {
		t.Errorf("get: %v\n%s", err, out)
	}
	runCLI(t, 0, "transcript", "verify", "--addr", addr, runID)
}

// TestRejectFromTheCLINeverSaysAnEndingRunResumed: approve --reject said "run X resumed" of a
// run the rejection ends USER_REJECTED, whether --end-run asked for it or the configured
// tools.reject_ends_run did. With --end-run it says the run ends; without, it says the run
// goes on or ends as tools.reject_ends_run says, which the CLI cannot know.
func TestRejectFromTheCLINeverSaysAnEndingRunResumed(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	cfg.Tools.RejectEndsRun = true
	addr := startMesh(t, cfg).Addr(mesh.Orchestrator)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--reject", "--end-run"}, "ends USER_REJECTED"},
		{[]string{"--reject"}, "tools.reject_ends_run"},
	} {
		out, _ := runCLI(t, 0, "run", "--addr", addr, "What is 6 times 7?")
		m := regexp.MustCompile(`run (\S+) is waiting for approval of call (\S+) `).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("run output does not say it waits for approval:\n%s", out)
		}
		args := append(append([]string{"approve", "--addr", addr}, tc.flags...), m[1], m[2])
		out, _ = runCLI(t, 0, args...)
		if strings.Contains(out, "resumed") || !strings.Contains(out, tc.want) || !strings.Contains(out, "agentmesh watch "+m[1]) {
			t.Errorf("approve %s says %q; want no %q of a run that ends, and %q", strings.Join(tc.flags, " "), out, "resumed", tc.want)
		}
		if _, errOut := runCLI(t, 1, "watch", "--addr", addr, m[1]); !strings.Contains(errOut, "REJECTED USER_REJECTED") {
			t.Errorf("the run did not end USER_REJECTED:\n%s", errOut)
		}
	}
}

// TestPlanApprovalFromTheCLI: a run that waits for its plan's approval is shown waiting for
// its plan, with the command that decides it, by run and by watch alike: both called it
// "call plan (plan)", a tool call of that name.
func TestPlanApprovalFromTheCLI(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.Tools.ApprovePlans = true
	cfg.Tools.RequireApproval = []string{"calculator"}
	addr := startMesh(t, cfg).Addr(mesh.Orchestrator)
	out, _ := runCLI(t, 0, "run", "--addr", addr, "What is 6 times 7?")
	m := regexp.MustCompile(`^run (\S+) is waiting for approval of its plan: agentmesh approve (\S+) plan\n$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("run does not say it waits for its plan's approval:\n%s", out)
	}
	runCLI(t, 0, "approve", "--addr", addr, "--reject", "--end-run", m[1], "plan")
	if _, errOut := runCLI(t, 1, "watch", "--addr", addr, m[1]); !strings.Contains(errOut, "  ? approval requested for the plan\n") {
		t.Errorf("watch does not show the plan waiting for approval:\n%s", errOut)
	}
}

// TestDecidingADecidedCallExits4: deciding again a call already decided otherwise (the run
// waits for another call's decision) is an invalid argument, exit 4 (the README's exit codes:
// a run that waits for no approval of it), not 1, the code of a run that failed, which
// FAILED_PRECONDITION got; the error says so.
func TestDecidingADecidedCallExits4(t *testing.T) {
	isolate(t)
	calc := func(id string) llmtest.ToolCall {
		return llmtest.ToolCall{ID: id, Name: "calculator", Arguments: `{"expression":"6*7"}`}
	}
	llm := llmtest.New(t, llmtest.Scenario{Name: "two", Match: "compute twice",
		Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{calc("call_a"), calc("call_b")}},
			{Content: "42 twice."},
		}})
	cfg := scriptedConfig(llm)
	cfg.Tools.RequireApproval = []string{"calculator"}
	addr := startMesh(t, cfg).Addr(mesh.Orchestrator)
	out, _ := runCLI(t, 0, "run", "--addr", addr, "compute twice")
	m := regexp.MustCompile(`run (\S+) is waiting for approval of call call_a `).
		FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("run output does not say it waits for approval of call_a:\n%s", out)
	}
	out, _ = runCLI(t, 0, "approve", "--addr", addr, m[1], "call_a")
	if !strings.Contains(out, "still waiting for") {
		t.Fatalf("approve call_a: %s", out)
	}
	_, errOut := runCLI(t, 4, "approve", "--addr", addr, "--reject", m[1], "call_a")
	if !strings.Contains(errOut, `tool call "call_a"`) ||
		!strings.Contains(errOut, "already decided") {
		t.Errorf("deciding call_a again: %s", errOut)
	}
}

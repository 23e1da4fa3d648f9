package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// writeResult saves a result as JSON, as `agentmesh get` prints it, and returns its path.
func writeResult(t *testing.T, r *typev1.RunResult) string {
	t.Helper()
	b, err := protojson.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "result.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTranscriptVerifyFile(t *testing.T) {
	chain := transcript.NewChain("adapter", "rules/rules-v1")
	conversation := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "hi"}}
	for _, st := range []typev1.RunState{typev1.RunState_RUN_STATE_PRECHECK, typev1.RunState_RUN_STATE_INFER} {
		chain.Append(st, "s", "", &typev1.Message{Content: st.String()}, nil, "", conversation)
	}
	result := &typev1.RunResult{RunId: "run-1", Conversation: conversation, FinalReport: &typev1.FinalReport{Content: "hello"}}
	chain.Append(typev1.RunState_RUN_STATE_TERMINATE, "TERMINATE", "", transcript.Ending(result), result.GetFinalReport(), "", conversation)
	result.Transcript = chain.Entries()
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"transcript", "verify", "--file", writeResult(t, result)}, &stdout, &stderr); code != 0 {
		t.Fatalf("intact transcript: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "3 entries, chain intact") {
		t.Errorf("output %q", stdout.String())
	}
	result.Transcript[1].ResultHash = "forged"
	stdout.Reset()
	stderr.Reset()
	if code := run(t.Context(), []string{"transcript", "verify", "--file", writeResult(t, result)}, &stdout, &stderr); code != 1 {
		t.Fatalf("tampered transcript: exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "entry 2") {
		t.Errorf("error %q does not name entry 2", stderr.String())
	}
}

// TestTranscriptVerifyCatchesEditedResults (issue 11.8): a run with a tool goes through a mesh
// of two orchestrator replicas; its result is then edited in the memory stage's store (the
// tool result 42 → 43, the final answer, the accounting; TERMINATE and the final report cut
// off, which left a finished result that verified). `agentmesh transcript verify`, asked of
// the other replica, passes the untouched result and fails each edit, naming the entry that
// recorded what was changed.
func TestTranscriptVerifyCatchesEditedResults(t *testing.T) {
	isolate(t)
	m, err := mesh.Start(t.Context(), mesh.Options{Ephemeral: true, StoreDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler), Orchestrators: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	addrs := m.OrchestratorAddrs()
	out, _ := runCLI(t, 0, "run", "--addr", addrs[0], "--json", "What is 6 times 7?")
	done := &typev1.RunResult{}
	if err := protojson.Unmarshal([]byte(out), done); err != nil {
		t.Fatal(err)
	}
	if done.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s", done.GetOutcome())
	}
	runID := done.GetRunId()
	memory := memoryv1.NewMemoryServiceClient(dialService(t, m.Addr(mesh.Memory)))
	stored, err := memory.GetRun(t.Context(), &memoryv1.GetRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	original := stored.GetResult()
	other := agentv1.NewAgentServiceClient(dialService(t, addrs[1]))
	// save puts a result into the memory store and checks the other replica serves it, once
	// the run has retired its checkpoint (a moment after its result), which held the result
	// until then.
	save := func(t *testing.T, res *typev1.RunResult) {
		t.Helper()
		if _, err := memory.SaveRun(t.Context(), &memoryv1.SaveRunRequest{Result: res, UserId: "cli"}); err != nil {
			t.Fatal(err)
		}
		var err error
		if !poll(t, 10*time.Second, func() bool {
			var got *typev1.RunResult
			got, err = other.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
			return err == nil && proto.Equal(got, res)
		}) {
			t.Fatalf("the other replica does not serve the stored result: %v", err)
		}
	}
	verify := func(t *testing.T, want int) string {
		t.Helper()
		out, errOut := runCLI(t, want, "transcript", "verify", "--addr", addrs[1], runID)
		return out + errOut
	}
	if got := verify(t, 0); !strings.Contains(got, "chain intact") {
		t.Fatalf("untouched result: %s", got)
	}

	tests := []struct {
		name   string
		tamper func(*typev1.RunResult)
		want   string
	}{
		{"tool result", func(r *typev1.RunResult) {
			for _, msg := range r.GetConversation() {
				if msg.GetRole() == typev1.Role_ROLE_TOOL && msg.GetContent() == "42" {
					msg.Content = "43"
					return
				}
			}
			t.Fatalf("no tool result 42 in %v", r.GetConversation())
		}, "(RUN_STATE_OBSERVE, turn-1/OBSERVE/"},
		{"final answer", func(r *typev1.RunResult) {
			r.FinalReport.Content = strings.ReplaceAll(r.GetFinalReport().GetContent(), "42", "43")
		}, "(RUN_STATE_TERMINATE, TERMINATE): final_report does not match"},
		{"accounting", func(r *typev1.RunResult) { r.Accounting = r.GetAccounting()[1:] },
			"(RUN_STATE_TERMINATE, TERMINATE): the outcome, exit reason, error, usage, counts, decision or accounting"},
		{"contract", func(r *typev1.RunResult) { r.Contract = nil },
			"(RUN_STATE_TERMINATE, TERMINATE): the result has no contract, but its entries carry a contract_hash (the contract was removed)"},
		{"ending", func(r *typev1.RunResult) {
			r.Transcript, r.FinalReport = r.GetTranscript()[:len(r.GetTranscript())-1], nil
		}, "the result's outcome is OUTCOME_COMPLETED_WITH_TOOLS, but its transcript does not end in TERMINATE (entries were removed)"},
		// Passed off as a pause, which has no TERMINATE: a pause names what it waits for, as
		// its entry recorded it (it verified, with the answer and the ending cut off).
		{"ending as a pause", func(r *typev1.RunResult) {
			r.Transcript, r.FinalReport = r.GetTranscript()[:len(r.GetTranscript())-1], nil
			r.Outcome = typev1.Outcome_OUTCOME_AWAITING_APPROVAL
		}, "the result's outcome is OUTCOME_AWAITING_APPROVAL, but it has no pending action (entries were removed)"},
		{"ending as a question", func(r *typev1.RunResult) {
			r.Transcript, r.FinalReport = r.GetTranscript()[:len(r.GetTranscript())-1], nil
			r.Outcome = typev1.Outcome_OUTCOME_AWAITING_INPUT
		}, "the result's outcome is OUTCOME_AWAITING_INPUT, but it has no pending question (entries were removed)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forged := proto.CloneOf(original)
			tc.tamper(forged)
			save(t, forged)
			if got := verify(t, 1); !strings.Contains(got, "transcript of run "+runID+" is broken: entry ") || !strings.Contains(got, tc.want) {
				t.Errorf("verify of an edited %s: %s, want it to name %q", tc.name, got, tc.want)
			}
			save(t, original)
			verify(t, 0)
		})
	}
}

// TestTranscriptVerifyOfARunStillRunning: a run that has not ended has no result to verify
// yet. `transcript verify` of it exited 1, the exit of a transcript found broken, with the
// API's "follow it with WatchRun", which names no command: a script auditing its runs took a
// run still going for a tampered one. It now exits 4, as for a run it cannot verify, says
// that the run is still running and how to follow it (agentmesh watch), and verifies the run
// once it ended.
func TestTranscriptVerifyOfARunStillRunning(t *testing.T) {
	isolate(t)
	hold := make(chan struct{})
	llm := llmtest.New(t, llmtest.Scenario{Name: "slow", Match: "take your time",
		Turns: []llmtest.Turn{{Content: "Done at last.", Hold: hold}}})
	addr := startMesh(t, scriptedConfig(llm)).Addr("orchestrator")
	stream, first := startSlowRun(t, addr)
	runID := first.GetRunId()

	_, errOut := runCLI(t, 4, "transcript", "verify", "--addr", addr, runID)
	if !strings.Contains(errOut, "still running") || !strings.Contains(errOut, "agentmesh watch "+runID) {
		t.Errorf("verify of a running run does not say it runs and how to follow it:\n%s", errOut)
	}
	close(hold)
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("the run's stream ended before run_finished: %v", err)
		}
		if ev.GetRunFinished() != nil {
			break
		}
	}
	if out, _ := runCLI(t, 0, "transcript", "verify", "--addr", addr, runID); !strings.Contains(out, "chain intact") {
		t.Errorf("verify of the ended run: %s", out)
	}
}

// TestTranscriptVerifyBindsAPausedResultToItsRun: a paused run's result has no TERMINATE entry,
// whose hash covers a finished result's run_id; its pause entry seals the pending action, which
// names the run. A paused result saved with `run --json` and given another run's id verified
// as that run's transcript; it now fails, naming the pause entry.
func TestTranscriptVerifyBindsAPausedResultToItsRun(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	addr := startMesh(t, cfg).Addr("orchestrator")
	out, _ := runCLI(t, 0, "run", "--addr", addr, "--json", "What is 6 times 7?")
	paused := &typev1.RunResult{}
	if err := protojson.Unmarshal([]byte(out), paused); err != nil {
		t.Fatal(err)
	}
	if paused.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
		t.Fatalf("outcome %s, want a pause", paused.GetOutcome())
	}
	runCLI(t, 0, "transcript", "verify", "--file", writeResult(t, paused))
	paused.RunId = "another-run"
	_, errOut := runCLI(t, 1, "transcript", "verify", "--file", writeResult(t, paused))
	if !strings.Contains(errOut, "RUN_STATE_AWAIT_APPROVAL") || !strings.Contains(errOut, "run_id") {
		t.Errorf("verify of a paused result given another run's id: %s", errOut)
	}
}

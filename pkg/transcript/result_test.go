package transcript_test

import (
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// recorder appends entries the way the orchestrator does: each step seals the conversation
// as it left it.
type recorder struct {
	chain    *transcript.Chain
	contract *typev1.ExecutionContract
	conv     []*typev1.Message
}

func newRecorder() *recorder {
	contract := &typev1.ExecutionContract{MaxTurns: 3, Targets: []*typev1.Target{{Provider: "p", Model: "m"}}}
	contract.ContractHash = transcript.ContractHash(contract)
	return &recorder{
		chain: transcript.NewChain("adapter", "p/m"), contract: contract,
		conv: []*typev1.Message{{Role: typev1.Role_ROLE_SYSTEM, Content: "system"}, {Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7?"}},
	}
}

func (r *recorder) step(st typev1.RunState, id string, action, result proto.Message) {
	r.chain.Append(st, id, r.contract.GetContractHash(), action, result, strings.ToLower(id), r.conv)
}

// finished is a run with one tool call whose result message grows in place after it was
// first sealed (as the XML transport's XML-PAST message does), finished by TERMINATE.
// Entries: 1 PRECHECK, 2 INFER, 3 OBSERVE c1, 4 OBSERVE c2, 5 INFER, 6 COMMIT, 7 TERMINATE.
func finished() *typev1.RunResult {
	r := newRecorder()
	r.step(typev1.RunState_RUN_STATE_PRECHECK, "PRECHECK", nil, r.contract)
	call := &typev1.ToolCall{Id: "c1", Name: "calculator", RawArguments: `{"expression":"6*7"}`}
	r.conv = append(r.conv, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{call}})
	r.step(typev1.RunState_RUN_STATE_INFER, "turn-1/INFER", nil, nil)
	r.conv = append(r.conv, &typev1.Message{Role: typev1.Role_ROLE_TOOL, Content: "first", ToolCallId: "c1", Name: "calculator"})
	r.step(typev1.RunState_RUN_STATE_OBSERVE, "turn-1/OBSERVE/c1", nil, nil)
	r.conv[3].Content = "first\n42"
	r.step(typev1.RunState_RUN_STATE_OBSERVE, "turn-1/OBSERVE/c2", nil, nil)
	r.conv = append(r.conv, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "6 times 7 is 42."})
	r.step(typev1.RunState_RUN_STATE_INFER, "turn-2/INFER", nil, nil)
	r.step(typev1.RunState_RUN_STATE_COMMIT, "turn-2/COMMIT", nil, nil)
	res := &typev1.RunResult{
		RunId: "run-1", Outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, ExitReason: "COMPLETED", Success: true,
		Contract: r.contract, Usage: &typev1.TokenUsage{Input: 20, Output: 10, Total: 30}, Turns: 2, ToolCalls: 1,
		Conversation: r.conv,
		Accounting: []*typev1.AccountingEntry{
			{Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Provider: "p", Model: "m", Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK},
			{Type: typev1.AccountingType_ACCOUNTING_TYPE_TOOL, Command: "calculator", Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK, CharactersOut: 2},
		},
		FinalReport: &typev1.FinalReport{Status: typev1.ReportStatus_REPORT_STATUS_SUCCESS, Content: "6 times 7 is 42."},
	}
	r.step(typev1.RunState_RUN_STATE_TERMINATE, "TERMINATE", transcript.Ending(res), res.GetFinalReport())
	res.Transcript = r.chain.Entries()
	return res
}

func TestVerifyResultAcceptsAnUntouchedResult(t *testing.T) {
	res := finished()
	if err := transcript.VerifyResult(res); err != nil {
		t.Fatalf("VerifyResult(untouched) = %v", err)
	}
	// A result saved as JSON (agentmesh get, run --json) and read back verifies too.
	b, err := protojson.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	back := &typev1.RunResult{}
	if err := protojson.Unmarshal(b, back); err != nil {
		t.Fatal(err)
	}
	if err := transcript.VerifyResult(back); err != nil {
		t.Fatalf("VerifyResult(JSON round trip) = %v", err)
	}
	// What the memory stage learned from the run after it ended is no part of its ending.
	res.Learning = &typev1.RunLearning{Method: typev1.LearningMethod_LEARNING_METHOD_RULES, MemoryIds: []string{"m1"}}
	if err := transcript.VerifyResult(res); err != nil {
		t.Fatalf("VerifyResult(with learning) = %v", err)
	}
}

func TestVerifyResultDetectsEdits(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(*typev1.RunResult)
		want   string
	}{
		{"tool result", func(r *typev1.RunResult) { r.Conversation[3].Content = "first\n43" },
			"entry 4 (RUN_STATE_OBSERVE, turn-1/OBSERVE/c2): conversation[3] (ROLE_TOOL) does not match"},
		{"tool call arguments", func(r *typev1.RunResult) { r.Conversation[2].ToolCalls[0].RawArguments = `{"expression":"1+1"}` },
			"entry 2 (RUN_STATE_INFER, turn-1/INFER): conversation[2] (ROLE_ASSISTANT)"},
		{"user message", func(r *typev1.RunResult) { r.Conversation[1].Content = "What is 6 times 8?" },
			"entry 1 (RUN_STATE_PRECHECK, PRECHECK): conversation[1] (ROLE_USER)"},
		{"final answer", func(r *typev1.RunResult) { r.FinalReport.Content = "6 times 7 is 43." },
			"entry 7 (RUN_STATE_TERMINATE, TERMINATE): final_report does not match result_hash"},
		{"final assistant message", func(r *typev1.RunResult) { r.Conversation[4].Content = "43" },
			"entry 5 (RUN_STATE_INFER, turn-2/INFER): conversation[4]"},
		{"accounting", func(r *typev1.RunResult) { r.Accounting[1].CharactersOut = 3 }, "entry 7 (RUN_STATE_TERMINATE, TERMINATE): the outcome"},
		{"accounting entry removed", func(r *typev1.RunResult) { r.Accounting = r.Accounting[:1] }, "entry 7"},
		{"usage", func(r *typev1.RunResult) { r.Usage.Total = 3 }, "accounting do not match action_hash"},
		{"outcome", func(r *typev1.RunResult) { r.Outcome = typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY }, "entry 7"},
		{"error added", func(r *typev1.RunResult) { r.Error = &typev1.RunError{Code: "X"} }, "entry 7"},
		{"contract", func(r *typev1.RunResult) { r.Contract.MaxTurns = 30 }, "entry 7 (RUN_STATE_TERMINATE, TERMINATE): the result's contract"},
		{"contract and its hash", func(r *typev1.RunResult) {
			r.Contract.MaxTurns = 30
			r.Contract.ContractHash = transcript.ContractHash(r.Contract)
		}, "the result's contract does not match contract_hash"},
		{"contract removed", func(r *typev1.RunResult) { r.Contract = nil },
			"entry 7 (RUN_STATE_TERMINATE, TERMINATE): the result has no contract, but its entries carry a contract_hash (the contract was removed)"},
		{"message removed", func(r *typev1.RunResult) { r.Conversation = r.Conversation[:4] },
			"entry 5 (RUN_STATE_INFER, turn-2/INFER): conversation[4], sealed by this entry, is missing"},
		{"message added", func(r *typev1.RunResult) {
			r.Conversation = append(r.Conversation, &typev1.Message{Role: typev1.Role_ROLE_USER, Content: "and 8?"})
		}, "entry 7 (RUN_STATE_TERMINATE, TERMINATE): conversation[5] (ROLE_USER) is not sealed by any entry"},
		{"TERMINATE removed", func(r *typev1.RunResult) { r.Transcript = r.Transcript[:6] },
			"entry 6 (RUN_STATE_COMMIT, turn-2/COMMIT): the result has a final report, but its transcript does not end in TERMINATE"},
		{"TERMINATE and the final report removed", func(r *typev1.RunResult) {
			r.Transcript, r.FinalReport = r.Transcript[:6], nil
		}, "entry 6 (RUN_STATE_COMMIT, turn-2/COMMIT): the result's outcome is OUTCOME_COMPLETED_WITH_TOOLS, but its transcript does not end in TERMINATE"},
		{"TERMINATE removed from a failed run", func(r *typev1.RunResult) {
			r.Transcript, r.FinalReport = r.Transcript[:6], nil
			r.Outcome, r.Success = typev1.Outcome_OUTCOME_FAILED_TIMEOUT, false
		}, "the result's outcome is OUTCOME_FAILED_TIMEOUT, but its transcript does not end in TERMINATE"},
		{"TERMINATE removed and no outcome", func(r *typev1.RunResult) {
			r.Transcript, r.FinalReport, r.Outcome = r.Transcript[:6], nil, typev1.Outcome_OUTCOME_UNSPECIFIED
		}, "the result's outcome is OUTCOME_UNSPECIFIED, but its transcript does not end in TERMINATE"},
		{"the first of two edits is named", func(r *typev1.RunResult) {
			r.FinalReport.Content = "forged"
			r.Conversation[3].Content = "forged"
		}, "entry 4 (RUN_STATE_OBSERVE"},
		{"a chain edit still comes first", func(r *typev1.RunResult) {
			r.FinalReport.Content = "forged"
			r.Transcript[1].Detail = "forged"
		}, "entry 2 (RUN_STATE_INFER): hash does not match its contents"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := finished()
			tc.tamper(res)
			err := transcript.VerifyResult(res)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("VerifyResult = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestVerifyResultRefusesMergedSeals: hash version 1 covers an entry's seals as "index:hash"
// each followed by a NUL byte, so two seals {i, h1}, {k, h2} and one seal {i, h1 NUL "k:" h2}
// hash alike. An edit that merges them hides the entry's seal of message k from the check (the
// seal of i is superseded by a later entry), so message k could be put back as an earlier
// entry sealed it: here the XML-PAST message without its second tool response. A seal whose
// hash is not a SHA-256 hex digest is refused. (From version 2 on the merged seal changes the
// entry's hash.)
func TestVerifyResultRefusesMergedSeals(t *testing.T) {
	r := newRecorder()
	r.step(typev1.RunState_RUN_STATE_PRECHECK, "PRECHECK", nil, nil)
	r.conv = append(r.conv,
		&typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "<slots 1 and 2>"},
		&typev1.Message{Role: typev1.Role_ROLE_USER, Content: "response 1"})
	r.step(typev1.RunState_RUN_STATE_OBSERVE, "turn-1/OBSERVE/1", nil, nil) // seals 2 and 3
	r.conv[2] = &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "<slots 1 and 2>, noted"}
	r.conv[3].Content = "response 1\nresponse 2"
	r.step(typev1.RunState_RUN_STATE_OBSERVE, "turn-1/OBSERVE/2", nil, nil) // seals 2 and 3 again
	r.conv[2] = &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "<slots 1 and 2>, done"}
	r.step(typev1.RunState_RUN_STATE_COMMIT, "turn-1/COMMIT", nil, nil) // seals 2 again
	pending := &typev1.PendingAction{RunId: "run-1"}
	r.step(typev1.RunState_RUN_STATE_AWAIT_APPROVAL, "turn-2/AWAIT_APPROVAL", pending, nil)
	res := &typev1.RunResult{
		RunId: "run-1", Outcome: typev1.Outcome_OUTCOME_AWAITING_APPROVAL, Contract: r.contract,
		Conversation: r.conv, Transcript: r.chain.Entries(), PendingAction: pending,
	}
	prev := ""
	for _, e := range res.Transcript { // as a release writing hash version 1 recorded them
		e.HashVersion, e.PrevHash = 1, prev
		e.Hash = transcript.EntryHash(e)
		prev = e.GetHash()
	}
	if err := transcript.VerifyResult(res); err != nil {
		t.Fatalf("VerifyResult(untouched) = %v", err)
	}
	e := res.Transcript[2]
	if len(e.GetMessages()) != 2 || e.GetMessages()[0].GetIndex() != 2 || e.GetMessages()[1].GetIndex() != 3 {
		t.Fatalf("entry 3 seals %v, want messages 2 and 3", e.GetMessages())
	}
	merged := &typev1.MessageSeal{Index: 2, Hash: e.GetMessages()[0].GetHash() + "\x00" + "3:" + e.GetMessages()[1].GetHash()}
	e.Messages = []*typev1.MessageSeal{merged}
	res.Conversation[3] = &typev1.Message{Role: typev1.Role_ROLE_USER, Content: "response 1"}
	err := transcript.VerifyResult(res)
	if err == nil || !strings.Contains(err.Error(), "entry 3 (RUN_STATE_OBSERVE): messages[0].hash is not a SHA-256 hex digest (the entry was altered)") {
		t.Fatalf("VerifyResult(merged seals, tool response removed) = %v", err)
	}
}

// TestVerifyResultRefusesSealsOfAnUnsealingEntry: a run begun before hash version 1 and
// resumed since has entries of version 0, whose hash covers no seals. A seal added to one of
// them is no part of the chain, so it must not vouch for a message: here one added to the
// conversation after the run ended.
func TestVerifyResultRefusesSealsOfAnUnsealingEntry(t *testing.T) {
	r := newRecorder()
	old := &typev1.TranscriptEntry{
		Seq: 1, StepId: "PRECHECK", State: typev1.RunState_RUN_STATE_PRECHECK, ContractHash: r.contract.GetContractHash(),
		AdapterVersion: "adapter", ModelProfileId: "p/m",
	}
	old.Hash = transcript.EntryHash(old)
	r.chain = transcript.Resume([]*typev1.TranscriptEntry{old}, "adapter", "p/m")
	r.step(typev1.RunState_RUN_STATE_RESUMED, "RESUMED-1", nil, nil) // seals 0 and 1
	r.conv = append(r.conv, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "Hello."})
	r.step(typev1.RunState_RUN_STATE_INFER, "turn-1/INFER", nil, nil)
	res := &typev1.RunResult{
		RunId: "run-1", Outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, ExitReason: "COMPLETED", Success: true,
		Contract: r.contract, Conversation: r.conv, FinalReport: &typev1.FinalReport{Content: "Hello."},
	}
	r.step(typev1.RunState_RUN_STATE_TERMINATE, "TERMINATE", transcript.Ending(res), res.GetFinalReport())
	res.Transcript = r.chain.Entries()
	if err := transcript.VerifyResult(res); err != nil {
		t.Fatalf("VerifyResult(untouched) = %v", err)
	}
	forged := &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: "You also asked me to wire the money."}
	res.Conversation = append(res.Conversation, forged)
	res.Transcript[0].Messages = []*typev1.MessageSeal{{Index: 3, Hash: transcript.MessageHash(forged)}}
	err := transcript.VerifyResult(res)
	if err == nil || !strings.Contains(err.Error(), "entry 1 (RUN_STATE_PRECHECK): hash_version 0 covers no message seals, but the entry has 1 (the entry was altered)") {
		t.Fatalf("VerifyResult(a seal added to a version 0 entry) = %v", err)
	}
}

// paused is a run waiting for approval of one call: entry 3 is the pause.
func paused() *typev1.RunResult {
	r := newRecorder()
	r.step(typev1.RunState_RUN_STATE_PRECHECK, "PRECHECK", nil, nil)
	call := &typev1.ToolCall{Id: "c1", Name: "calculator", RawArguments: `{"expression":"6*7"}`}
	r.conv = append(r.conv, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, ToolCalls: []*typev1.ToolCall{call}})
	r.step(typev1.RunState_RUN_STATE_INFER, "turn-1/INFER", nil, nil)
	pending := &typev1.PendingAction{RunId: "run-1", ToolCalls: []*typev1.ToolCall{proto.CloneOf(call)}, Reason: "needs approval"}
	r.step(typev1.RunState_RUN_STATE_AWAIT_APPROVAL, "turn-1/AWAIT_APPROVAL", pending, nil)
	return &typev1.RunResult{
		RunId: "run-1", Outcome: typev1.Outcome_OUTCOME_AWAITING_APPROVAL, ExitReason: "APPROVAL_REQUIRED",
		Contract: r.contract, Conversation: r.conv, PendingAction: pending, Transcript: r.chain.Entries(),
	}
}

func TestVerifyResultOfAPausedRun(t *testing.T) {
	if err := transcript.VerifyResult(paused()); err != nil {
		t.Fatalf("VerifyResult(paused) = %v", err)
	}
	res := paused()
	res.PendingAction.ToolCalls[0].RawArguments = `{"expression":"rm -rf /"}`
	if err := transcript.VerifyResult(res); err == nil || !strings.Contains(err.Error(), "entry 3 (RUN_STATE_AWAIT_APPROVAL, turn-1/AWAIT_APPROVAL): the pending action") {
		t.Fatalf("VerifyResult(altered pending action) = %v", err)
	}
}

// asking is a run that asks its user a question: entry 2 is the pause, which records it.
func asking() *typev1.RunResult {
	r := newRecorder()
	r.step(typev1.RunState_RUN_STATE_PRECHECK, "PRECHECK", nil, nil)
	q := &typev1.PendingQuestion{RunId: "run-1", Id: "turn-1", Question: "Which page should I export?", Reason: "the export is too large"}
	r.conv = append(r.conv, &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: q.GetQuestion()})
	r.step(typev1.RunState_RUN_STATE_AWAIT_INPUT, "turn-1/AWAIT_INPUT", q, nil)
	return &typev1.RunResult{
		RunId: "run-1", Outcome: typev1.Outcome_OUTCOME_AWAITING_INPUT, ExitReason: "INPUT_REQUIRED",
		Contract: r.contract, Conversation: r.conv, PendingQuestion: q, Transcript: r.chain.Entries(),
	}
}

func TestVerifyResultOfARunAskingItsUser(t *testing.T) {
	if err := transcript.VerifyResult(asking()); err != nil {
		t.Fatalf("VerifyResult(asking) = %v", err)
	}
	res := asking()
	res.PendingQuestion.Question = "Shall I delete every record?"
	if err := transcript.VerifyResult(res); err == nil || !strings.Contains(err.Error(), "entry 2 (RUN_STATE_AWAIT_INPUT, turn-1/AWAIT_INPUT): the pending question does not match action_hash") {
		t.Fatalf("VerifyResult(altered pending question) = %v", err)
	}
	res = asking()
	res.Transcript = res.Transcript[:1]
	res.Conversation = res.Conversation[:2]
	if err := transcript.VerifyResult(res); err == nil || !strings.Contains(err.Error(), "entry 1 (RUN_STATE_PRECHECK, PRECHECK): the result has a pending question, but no entry records a pause") {
		t.Fatalf("VerifyResult(pause removed) = %v", err)
	}
}

func TestVerifyResultNeedsATranscript(t *testing.T) {
	if err := transcript.VerifyResult(&typev1.RunResult{RunId: "r"}); err == nil {
		t.Fatal("a result without transcript verified")
	}
}

// TestContractHashCoversAllButItsOwnField: the hash is that of the contract's deterministic
// encoding with contract_hash empty (as a verifier recomputes it from the stored contract),
// it changes with any other field, nested ones included, and the contract is left as it was.
func TestContractHashCoversAllButItsOwnField(t *testing.T) {
	c := &typev1.ExecutionContract{
		MaxTurns: 3, Targets: []*typev1.Target{{Provider: "p", Model: "m"}},
		ParentContractHash: "parent", ContractHash: "stale",
	}
	cleared := proto.CloneOf(c)
	cleared.ContractHash = ""
	want := transcript.MessageHash(cleared)
	if got := transcript.ContractHash(c); got != want {
		t.Fatalf("ContractHash = %s, want the hash of the contract without its hash, %s", got, want)
	}
	if c.GetContractHash() != "stale" || len(c.GetTargets()) != 1 {
		t.Fatalf("ContractHash changed the contract: %v", c)
	}
	c.Targets[0].Model = "other"
	if transcript.ContractHash(c) == want {
		t.Error("a changed target left the contract's hash as it was")
	}
}

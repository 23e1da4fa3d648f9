package transcript

import (
	"errors"
	"fmt"
	"slices"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Ending is the part of a final result that its TERMINATE entry's action hash covers: the
// result without its transcript, conversation, contract and final report, which are covered
// on their own (message seals, contract_hash, TERMINATE's result hash), and without the
// learning the memory stage adds after the run ended. It shares its fields' values with res.
func Ending(res *typev1.RunResult) *typev1.RunResult {
	out := &typev1.RunResult{}
	dst := out.ProtoReflect()
	src := res.ProtoReflect()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch fd.Name() {
		case "transcript", "conversation", "contract", "final_report", "learning":
		default:
			dst.Set(fd, v)
		}
		return true
	})
	dst.SetUnknown(src.GetUnknown())
	return out
}

// ContractHash is the hex SHA-256 of a contract's deterministic serialisation with its own
// contract_hash field empty: the hash the contract carries, and every transcript entry.
func ContractHash(c *typev1.ExecutionContract) string {
	// A clone, cleared: protobuf's generated copy is cheaper than a reflective shallow copy
	// without the field (as Ending makes), which boxes every scalar field it sets (over a dozen
	// more allocations a call, measured), and a contract has no large fields to share.
	clone := proto.CloneOf(c)
	clone.ContractHash = ""
	return MessageHash(clone)
}

// VerifyResult checks a stored run result: its transcript chain (Verify), and that the result
// shows what the chain recorded, so editing anything an auditor reads fails:
//
//   - the contract hashes to its contract_hash, the one of the last entry (and is there when
//     the entries carry one);
//   - every message of the conversation (tool results included) matches the seal of the
//     entry that added or last changed it, and no sealed message is missing;
//   - a finished run's transcript ends in TERMINATE, whose result hash is the final report's
//     and whose action hash is Ending's (outcome, exit reason, error, usage, counts,
//     decision and accounting);
//   - a paused run's pending action (pending question) is there and is the one its last
//     AWAIT_APPROVAL (AWAIT_INPUT) entry recorded, and a result whose transcript does not end
//     in TERMINATE is a paused one (OUTCOME_AWAITING_APPROVAL or OUTCOME_AWAITING_INPUT).
//
// When several things do not match, the error names the first entry they break. Entries of
// hash version 0 carry no message seals and no ending: a transcript of only such entries
// vouches for its chain and the final report alone.
func VerifyResult(res *typev1.RunResult) error {
	entries := res.GetTranscript()
	if err := Verify(entries); err != nil {
		return err
	}
	if len(entries) == 0 {
		return errors.New("the result has no transcript")
	}
	var problems []problem
	problems = append(problems, checkContract(res, entries)...)
	problems = append(problems, checkMessages(res.GetConversation(), entries)...)
	problems = append(problems, checkEnding(res, entries)...)
	if len(problems) == 0 {
		return nil
	}
	first := slices.MinFunc(problems, func(a, b problem) int { return int(a.seq - b.seq) })
	return first.err
}

// problem is a mismatch between a result and the entry whose seq it breaks.
type problem struct {
	seq int64
	err error
}

func broken(e *typev1.TranscriptEntry, format string, args ...any) problem {
	return problem{seq: e.GetSeq(), err: fmt.Errorf("entry %d (%s, %s): %s", e.GetSeq(), e.GetState(), e.GetStepId(), fmt.Sprintf(format, args...))}
}

func checkContract(res *typev1.RunResult, entries []*typev1.TranscriptEntry) []problem {
	c := res.GetContract()
	last := entries[len(entries)-1]
	switch {
	case c == nil && last.GetContractHash() != "":
		return []problem{broken(last, "the result has no contract, but its entries carry a contract_hash (the contract was removed)")}
	case c == nil || (ContractHash(c) == c.GetContractHash() && c.GetContractHash() == last.GetContractHash()):
		return nil
	}
	return []problem{broken(last, "the result's contract does not match contract_hash (the contract was altered)")}
}

// checkMessages compares the conversation with the last seal of each message.
func checkMessages(conversation []*typev1.Message, entries []*typev1.TranscriptEntry) []problem {
	type sealedBy struct {
		hash  string
		entry *typev1.TranscriptEntry
	}
	seals := map[int]sealedBy{}
	sealing := false
	for _, e := range entries {
		sealing = sealing || e.GetHashVersion() >= 1
		for _, s := range e.GetMessages() {
			seals[int(s.GetIndex())] = sealedBy{s.GetHash(), e}
		}
	}
	if !sealing {
		return nil
	}
	var problems []problem
	for i, m := range conversation {
		s, ok := seals[i]
		switch {
		case !ok:
			problems = append(problems, broken(entries[len(entries)-1],
				"conversation[%d] (%s) is not sealed by any entry (a message was added)", i, m.GetRole()))
		case MessageHash(m) != s.hash:
			problems = append(problems, broken(s.entry,
				"conversation[%d] (%s) does not match the message this entry sealed (the message was altered)", i, m.GetRole()))
		}
	}
	for i, s := range seals {
		if i >= len(conversation) {
			problems = append(problems, broken(s.entry, "conversation[%d], sealed by this entry, is missing (a message was removed)", i))
		}
	}
	return problems
}

// checkEnding compares a finished result with its TERMINATE entry, and a paused one with its
// last pause.
func checkEnding(res *typev1.RunResult, entries []*typev1.TranscriptEntry) []problem {
	last := entries[len(entries)-1]
	if last.GetState() != typev1.RunState_RUN_STATE_TERMINATE {
		if res.GetFinalReport() != nil {
			return []problem{broken(last, "the result has a final report, but its transcript does not end in TERMINATE (entries were removed)")}
		}
		o := res.GetOutcome()
		if o != typev1.Outcome_OUTCOME_AWAITING_APPROVAL && o != typev1.Outcome_OUTCOME_AWAITING_INPUT {
			// Only a pause is a result without TERMINATE: a finished one that lacks it had its
			// ending cut off, and with it all that vouched for its outcome and accounting.
			return []problem{broken(last, "the result's outcome is %s, but its transcript does not end in TERMINATE (entries were removed)", o)}
		}
		// A pause waits for a decision or an answer, and names it: without it, a finished
		// result cut before its TERMINATE entry passed for a pause.
		switch {
		case o == typev1.Outcome_OUTCOME_AWAITING_APPROVAL && res.GetPendingAction() == nil:
			return []problem{broken(last,
				"the result's outcome is %s, but it has no pending action (entries were removed)", o)}
		case o == typev1.Outcome_OUTCOME_AWAITING_INPUT && res.GetPendingQuestion() == nil:
			return []problem{broken(last,
				"the result's outcome is %s, but it has no pending question (entries were removed)", o)}
		}
		var problems []problem
		if a := res.GetPendingAction(); a != nil {
			problems = append(problems, checkPending(a, a.GetRunId(), res.GetRunId(), "pending action",
				typev1.RunState_RUN_STATE_AWAIT_APPROVAL, entries)...)
		}
		if q := res.GetPendingQuestion(); q != nil {
			problems = append(problems, checkPending(q, q.GetRunId(), res.GetRunId(), "pending question",
				typev1.RunState_RUN_STATE_AWAIT_INPUT, entries)...)
		}
		return problems
	}
	var problems []problem
	if MessageHash(res.GetFinalReport()) != last.GetResultHash() {
		problems = append(problems, broken(last, "final_report does not match result_hash (the final report was altered)"))
	}
	if last.GetHashVersion() >= 1 && MessageHash(Ending(res)) != last.GetActionHash() {
		problems = append(problems, broken(last,
			"the outcome, exit reason, error, usage, counts, decision or accounting do not match action_hash (they were altered)"))
	}
	return problems
}

// checkPending compares a paused result's pending action or question (what) with the action
// of the last entry of the pause state that recorded one, and the result's run_id (runID)
// with the run the pending action names (runOf): a paused result has no TERMINATE entry to
// cover its run_id, and its pause entry seals the run's id in what it waits for.
func checkPending(pending proto.Message, runOf, runID, what string, pause typev1.RunState,
	entries []*typev1.TranscriptEntry,
) []problem {
	for _, e := range slices.Backward(entries) {
		if e.GetState() == pause && e.GetActionHash() != "" {
			switch {
			case MessageHash(pending) != e.GetActionHash():
				return []problem{broken(e, "the %s does not match action_hash (it was altered)", what)}
			case runOf != runID:
				return []problem{broken(e, "the result's run_id %q is not the run of the %s this entry "+
					"sealed, %q (the run_id was altered)", runID, what, runOf)}
			}
			return nil
		}
	}
	return []problem{broken(entries[len(entries)-1], "the result has a %s, but no entry records a pause", what)}
}

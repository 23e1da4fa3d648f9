package transcript

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// referenceEntryHash is DESIGN §6's hash as first written: each field, then a NUL byte (up
// to hash version 1) or after its length as a uvarint (from version 2), hashed one after the
// other.
func referenceEntryHash(e *typev1.TranscriptEntry) string {
	parts := []string{
		e.GetPrevHash(), e.GetContractHash(), e.GetState().String(), e.GetActionHash(),
		e.GetResultHash(), e.GetAdapterVersion(), e.GetModelProfileId(),
	}
	if e.GetHashVersion() >= 1 {
		when := ""
		if t := e.GetTime(); t != nil {
			when = fmt.Sprintf("%d.%09d", t.GetSeconds(), t.GetNanos())
		}
		parts = append(parts, "v"+strconv.Itoa(int(e.GetHashVersion())), e.GetStepId(), e.GetDetail(), when)
		for _, s := range e.GetMessages() {
			parts = append(parts, strconv.Itoa(int(s.GetIndex()))+":"+s.GetHash())
		}
	}
	h := sha256.New()
	for _, part := range parts {
		if e.GetHashVersion() >= 2 {
			h.Write(binary.AppendUvarint(nil, uint64(len(part))))
			h.Write([]byte(part))
		} else {
			h.Write([]byte(part))
			h.Write([]byte{0})
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestEntryHashIsTheReference: the hash of every kind of entry (both hash versions, with and
// without a time, seals, a time that is not valid) is the reference's, so no stored chain
// verifies differently.
func TestEntryHashIsTheReference(t *testing.T) {
	full := &typev1.TranscriptEntry{
		Seq: 3, StepId: "turn-2/INFER", State: typev1.RunState_RUN_STATE_INFER, ContractHash: "c", ActionHash: "a",
		ResultHash: "r", PrevHash: "p", AdapterVersion: "v1", ModelProfileId: "m", Detail: "3 messages, 120 tokens",
		Time: &timestamppb.Timestamp{Seconds: 1_764_000_000, Nanos: 5}, HashVersion: 1,
		Messages: []*typev1.MessageSeal{{Index: 0, Hash: "h0"}, {Index: 12, Hash: "h12"}},
	}
	entries := []*typev1.TranscriptEntry{
		full,
		{PrevHash: "p", State: typev1.RunState_RUN_STATE_PLAN, Time: timestamppb.Now()}, // version 0: no time in the hash
		{HashVersion: 1, StepId: "no time"},
		{HashVersion: 1, Time: &timestamppb.Timestamp{Seconds: -3, Nanos: 999_999_999}},
		{HashVersion: 1, Time: &timestamppb.Timestamp{Seconds: 7, Nanos: -1}},            // not a valid time
		{HashVersion: 1, Time: &timestamppb.Timestamp{Seconds: 7, Nanos: 1_000_000_000}}, // nor this one
		{HashVersion: 2, StepId: "turn-1/AWAIT_APPROVAL/call-1", Detail: "reject call-1: no\x00"},
		{HashVersion: 2, Detail: "no time", Messages: []*typev1.MessageSeal{{Index: 300, Hash: strings.Repeat("ab", 32)}}},
		{HashVersion: 3, Detail: "a newer version hashes as version 2 does"},
		{},
	}
	for i, e := range entries {
		if got, want := EntryHash(e), referenceEntryHash(e); got != want {
			t.Errorf("entry %d: hash %s, the reference's %s", i, got, want)
		}
	}
}

// TestEntryHashFieldsCannotShift: in hash version 1 a NUL byte in a field (a person's
// feedback in the detail, say) lets text move between two fields without changing the hash;
// from version 2 on, each field's length is hashed, so the entries differ.
func TestEntryHashFieldsCannotShift(t *testing.T) {
	for _, v := range []uint32{1, 2} {
		recorded := &typev1.TranscriptEntry{HashVersion: v, StepId: "turn-2/AWAIT_APPROVAL/call-1", Detail: "reject call-1\x00by acme/ann"}
		altered := &typev1.TranscriptEntry{HashVersion: v, StepId: "turn-2/AWAIT_APPROVAL/call-1\x00reject call-1", Detail: "by acme/ann"}
		if same := EntryHash(recorded) == EntryHash(altered); same != (v == 1) {
			t.Errorf("hash version %d: the entries hash alike: %v, want %v", v, same, v == 1)
		}
	}
}

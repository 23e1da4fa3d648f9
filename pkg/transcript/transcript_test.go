package transcript_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"google.golang.org/protobuf/proto"
)

func sample() []*typev1.TranscriptEntry {
	c := transcript.NewChain("adapter-1", "rules")
	states := []typev1.RunState{
		typev1.RunState_RUN_STATE_PRECHECK, typev1.RunState_RUN_STATE_INTENT, typev1.RunState_RUN_STATE_INFER,
		typev1.RunState_RUN_STATE_COMMIT, typev1.RunState_RUN_STATE_TERMINATE,
	}
	for i, s := range states {
		c.Append(s, "step", "contract-hash", &typev1.Message{Content: "action"}, &typev1.Message{Content: strings.Repeat("r", i)}, "", nil)
	}
	return c.Entries()
}

func TestVerifyAcceptsAnIntactChain(t *testing.T) {
	entries := sample()
	if err := transcript.Verify(entries); err != nil {
		t.Fatalf("Verify(intact) = %v", err)
	}
	if entries[0].GetPrevHash() != "" || entries[1].GetPrevHash() != entries[0].GetHash() {
		t.Fatal("chain links are wrong")
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name   string
		tamper func([]*typev1.TranscriptEntry) []*typev1.TranscriptEntry
		want   string
	}{
		{"altered result", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[2].ResultHash = transcript.MessageHash(&typev1.Message{Content: "forged"})
			return e
		}, "entry 3 (RUN_STATE_INFER): hash does not match"},
		{"altered state", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[1].State = typev1.RunState_RUN_STATE_EXECUTE
			return e
		}, "entry 2"},
		{"altered contract", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[4].ContractHash = "other"
			return e
		}, "entry 5"},
		{"removed entry", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			return append(e[:2:2], e[3:]...)
		}, "entry 3: seq is 4"},
		{"removed and renumbered", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			out := append(e[:2:2], e[3:]...)
			for i, x := range out {
				x.Seq = int64(i + 1)
			}
			return out
		}, "entry 3: prev_hash"},
		{"reordered", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[1], e[2] = e[2], e[1]
			return e
		}, "entry 2: seq is 3"},
		{"altered detail", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[3].Detail = "approve c1"
			return e
		}, "entry 4 (RUN_STATE_COMMIT): hash does not match"},
		{"altered step id", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[3].StepId = "turn-9/COMMIT"
			return e
		}, "entry 4"},
		{"altered time", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[0].Time.Seconds++
			return e
		}, "entry 1"},
		{"downgraded hash version", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[2].HashVersion = 0
			return e
		}, "entry 3"},
		{"unknown hash version", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[2].HashVersion = transcript.HashVersion + 1
			return e
		}, fmt.Sprintf("entry 3 (RUN_STATE_INFER): hash_version %d is newer", transcript.HashVersion+1)},
		{"rehashed but unlinked", func(e []*typev1.TranscriptEntry) []*typev1.TranscriptEntry {
			e[1].ActionHash = "x"
			e[1].Hash = transcript.EntryHash(e[1])
			return e
		}, "entry 3: prev_hash"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := transcript.Verify(tc.tamper(sample()))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestConcurrentAppendKeepsTheChain(t *testing.T) {
	c := transcript.NewChain("a", "m")
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { c.Append(typev1.RunState_RUN_STATE_COMMIT, "s", "h", nil, nil, "", nil) })
	}
	wg.Wait()
	if c.Len() != 50 {
		t.Fatalf("len = %d", c.Len())
	}
	if err := transcript.Verify(c.Entries()); err != nil {
		t.Fatal(err)
	}
}

func TestResumeContinuesTheChain(t *testing.T) {
	entries := sample()
	c := transcript.Resume(entries, "adapter-1", "rules")
	e := c.Append(typev1.RunState_RUN_STATE_COMMIT, "s", "h", nil, nil, "", nil)
	if e.GetSeq() != 6 || e.GetPrevHash() != entries[4].GetHash() {
		t.Fatalf("resumed entry = seq %d prev %q", e.GetSeq(), e.GetPrevHash())
	}
	entries[0].Hash = "mutated after resume"
	if err := transcript.Verify(c.Entries()); err != nil {
		t.Fatalf("resume must copy entries: %v", err)
	}
	if proto.Equal(entries[0], c.Entries()[0]) {
		t.Fatal("resume shares entries with the caller")
	}
}

// TestVerifyAcceptsVersion0Entries: entries written before hash version 1 (DESIGN §6's fields
// only) still verify, and a chain resumed from them continues in the current version.
func TestVerifyAcceptsVersion0Entries(t *testing.T) {
	old := &typev1.TranscriptEntry{Seq: 1, State: typev1.RunState_RUN_STATE_PRECHECK, ContractHash: "h", Detail: "not covered", StepId: "PRECHECK"}
	old.Hash = transcript.EntryHash(old)
	c := transcript.Resume([]*typev1.TranscriptEntry{old}, "a", "m")
	c.Append(typev1.RunState_RUN_STATE_INTENT, "INTENT", "h", nil, nil, "", []*typev1.Message{{Content: "hi"}})
	entries := c.Entries()
	if err := transcript.Verify(entries); err != nil {
		t.Fatal(err)
	}
	if entries[1].GetHashVersion() != transcript.HashVersion || len(entries[1].GetMessages()) != 1 {
		t.Fatalf("resumed entry = %v", entries[1])
	}
}

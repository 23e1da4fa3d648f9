package memory

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// VerifyAppend checks that entries continue a stored transcript of length entries whose last
// hash is lastHash ("" when empty): the first entry's seq is length+1, seqs are consecutive,
// and every prev_hash equals the hash of the entry before it (lastHash for the first, "" for
// seq 1). A mismatch is a FAILED_PRECONDITION error saying what did not match. Stores call it
// atomically with the append.
func VerifyAppend(length int64, lastHash string, entries []*typev1.TranscriptEntry) error {
	prev := lastHash
	for i, e := range entries {
		want := length + 1 + int64(i)
		if e.GetSeq() != want {
			return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
				"entries[%d].seq is %d, want %d: the stored transcript has %d entries", i, e.GetSeq(), want, length)
		}
		if e.GetPrevHash() != prev {
			return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
				"entries[%d].prev_hash is %q, want %q (the hash of entry %d)", i, e.GetPrevHash(), prev, want-1)
		}
		prev = e.GetHash()
	}
	return nil
}

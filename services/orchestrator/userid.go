package orchestrator

import "github.com/agentmesh/agentmesh/pkg/stageerr"

// checkUserID is the INVALID_ARGUMENT error of a request's user_id over MaxUserIDBytes or
// holding a control character (U+0000 to U+001F, U+007F), nil for any other. A user id is
// kept as text by the stores (PostgreSQL's cannot hold NUL, so such a run's result could not
// be saved) and shown in logs and errors, where a control character has no place. It runs
// for every run and allocates only for an id it refuses.
func checkUserID(id string) error {
	if n := len(id); n > MaxUserIDBytes {
		return stageerr.Invalid("user_id: at most %d bytes, got %d", MaxUserIDBytes, n)
	}
	for i := 0; i < len(id); i++ {
		// No byte of a multi-byte UTF-8 sequence is below 0x80: a byte check suffices.
		if c := id[i]; c < 0x20 || c == 0x7f {
			return stageerr.Invalid(
				"user_id: must not contain a control character; got %q at byte %d", c, i)
		}
	}
	return nil
}

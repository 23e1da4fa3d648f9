package observation

import (
	"fmt"

	"github.com/agentmesh/agentmesh/pkg/textcut"
)

// NoOutput is the observation of a successful tool that printed nothing.
const NoOutput = "(no output)"

// failed returns the failure observation of the ai-agent contract: "(tool failed: <reason>)".
func failed(reason string) string {
	if reason == "" {
		reason = "unknown error"
	}
	return "(tool failed: " + reason + ")"
}

// truncate keeps at most maxBytes bytes of s, cut so that no UTF-8 sequence is split, and
// prepends the notice "[TRUNCATED] Original size X bytes; truncated to Y bytes." and a newline.
// maxBytes 0 means no limit. It reports whether s was truncated.
func truncate(s string, maxBytes int64) (string, bool) {
	if maxBytes == 0 || int64(len(s)) <= maxBytes {
		return s, false
	}
	kept := s[:textcut.Boundary(s, int(maxBytes))]
	notice := fmt.Sprintf("[TRUNCATED] Original size %d bytes; truncated to %d bytes.\n", len(s), len(kept))
	return notice + kept, true
}

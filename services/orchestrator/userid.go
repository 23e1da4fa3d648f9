package orchestrator

import (
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// checkUserID is the INVALID_ARGUMENT error of a request's user_id over MaxUserIDBytes or
// holding a control character (C0, U+0000 to U+001F; DEL, U+007F; C1, U+0080 to U+009F),
// nil for any other. A user id is kept as text by the stores (PostgreSQL's cannot hold NUL,
// so such a run's result could not be saved) and shown in logs, errors and the JSON of its
// runs, where a terminal obeys a control character (a C1 one too: U+009B is CSI, as ESC [).
// It runs for every run and allocates only for an id it refuses.
func checkUserID(id string) error {
	if n := len(id); n > MaxUserIDBytes {
		return stageerr.Invalid("user_id: at most %d bytes, got %d", MaxUserIDBytes, n)
	}
	return auth.CheckControl("user_id", id)
}

package events

import (
	"fmt"
	"strconv"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// ReasonStartLost is the reason of the ErrorInfo detail of a watch refused because the run's
// events it asked for are no longer kept (Watch's FAILED_PRECONDITION). Its metadata name the
// run, "run_id", and the from_seq that follows the run from its first event kept, "from_seq".
const ReasonStartLost = "RUN_START_LOST"

// The metadata keys of ReasonStartLost.
const (
	startLostRunID   = "run_id"
	startLostFromSeq = "from_seq"
)

// startLost returns a FAILED_PRECONDITION error when ev, the first event the stream keeps of
// the run runID, shows that events after fromSeq are gone: ev is not the run's run_started
// (which the stream would keep first, had its limits not dropped it) and events come between
// fromSeq and ev. A run that published no run_started (it was cancelled while NATS was away)
// is refused too: its start is not in the stream either. Its ErrorInfo detail,
// ReasonStartLost, carries the from_seq to watch from, which LostStart reads.
func startLost(runID string, ev *eventv1.RunEvent, fromSeq uint64) error {
	if ev.GetRunStarted() != nil || ev.GetSeq() <= fromSeq+1 {
		return nil
	}
	from := ev.GetSeq() - 1
	err := stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
		"%s; watch with from_seq %d to follow the run from its first event kept",
		startLostCause(runID, from), from)
	err.Reason = ReasonStartLost
	err.Metadata = map[string]string{
		startLostRunID: runID, startLostFromSeq: strconv.FormatUint(from, 10),
	}
	return err
}

// startLostCause says why a watch of the run runID from a seq before fromSeq is refused.
func startLostCause(runID string, fromSeq uint64) string {
	return fmt.Sprintf("run %q: its events before seq %d are no longer kept (the event "+
		"stream's limits, nats.stream_max_age_ms and nats.stream_max_bytes, dropped them)",
		runID, fromSeq+1)
}

// LostStart reads err, the failure of a watch refused because the run's events it asked for
// are no longer kept (Watch's FAILED_PRECONDITION), from its ErrorInfo detail
// (ReasonStartLost), whatever its message says: cause is why, without the API's hint of the
// from_seq to watch from, and fromSeq that from_seq, for a client that names it otherwise
// (the CLI's --from). ok is false for any other error.
func LostStart(err error) (cause string, fromSeq uint64, ok bool) {
	e := stageerr.FromError(err)
	if e == nil || e.Reason != ReasonStartLost {
		return "", 0, false
	}
	fromSeq, perr := strconv.ParseUint(e.Metadata[startLostFromSeq], 10, 64)
	if perr != nil {
		return "", 0, false
	}
	return startLostCause(e.Metadata[startLostRunID], fromSeq), fromSeq, true
}

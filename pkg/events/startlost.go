package events

import (
	"strconv"
	"strings"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// Around the from_seq that ends startLost's message.
const (
	startLostHint = "; watch with from_seq "
	startLostTail = " to follow the run from its first event kept"
)

// startLost returns a FAILED_PRECONDITION error when ev, the first event the stream keeps of
// the run runID, shows that events after fromSeq are gone: ev is not the run's run_started
// (which the stream would keep first, had its limits not dropped it) and events come between
// fromSeq and ev. A run that published no run_started (it was cancelled while NATS was away)
// is refused too: its start is not in the stream either. LostStart reads its message.
func startLost(runID string, ev *eventv1.RunEvent, fromSeq uint64) error {
	if ev.GetRunStarted() != nil || ev.GetSeq() <= fromSeq+1 {
		return nil
	}
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
		"run %q: its events before seq %d are no longer kept (the event stream's limits, "+
			"nats.stream_max_age_ms and nats.stream_max_bytes, dropped them)"+startLostHint+
			"%d"+startLostTail,
		runID, ev.GetSeq(), ev.GetSeq()-1)
}

// LostStart reads msg, the message of a watch refused because the run's events it asked for
// are no longer kept (Watch's FAILED_PRECONDITION): cause is why, without the hint that ends
// it, and fromSeq the from_seq that follows the run from its first event kept, for a client
// that names it otherwise (the CLI's --from). ok is false for any other message.
func LostStart(msg string) (cause string, fromSeq uint64, ok bool) {
	i := strings.LastIndex(msg, startLostHint)
	if i < 0 {
		return "", 0, false
	}
	n, found := strings.CutSuffix(msg[i+len(startLostHint):], startLostTail)
	seq, err := strconv.ParseUint(n, 10, 64)
	if !found || err != nil {
		return "", 0, false
	}
	return msg[:i], seq, true
}

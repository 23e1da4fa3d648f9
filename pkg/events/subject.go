package events

import (
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/runid"
)

// StreamName is the JetStream stream that keeps every run's events.
const StreamName = "AGENTMESH_RUNS"

// subjectPrefix starts every run event subject.
const subjectPrefix = "agentmesh.run."

// MaxRunIDLength is the longest run id accepted, in bytes.
const MaxRunIDLength = runid.MaxBytes

// kindOneof describes the kind oneof of RunEvent.
var kindOneof = (&eventv1.RunEvent{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")

// Subject returns the subject of a run's event of the given kind:
// "agentmesh.run.<run_id>.<kind>". It does not check the run id; see ValidRunID.
func Subject(runID, kind string) string {
	return subjectPrefix + runID + "." + kind
}

// runFilter returns the subject filter that matches every event of a run.
func runFilter(runID string) string {
	return subjectPrefix + runID + ".>"
}

// Kind returns the name of the event's kind field ("run_started", "llm_delta", …,
// "run_finished"), or "" when ev is nil or its kind is unset.
func Kind(ev *eventv1.RunEvent) string {
	if ev == nil {
		return ""
	}
	fd := ev.ProtoReflect().WhichOneof(kindOneof)
	if fd == nil {
		return ""
	}
	return string(fd.Name())
}

// ValidRunID returns an INVALID_INPUT error saying what is wrong with id, or nil when id is a
// non-empty run id of at most MaxRunIDLength letters, digits, '_' and '-' (runid.Check).
// Other characters ('.', '*', '>', spaces) would break the run's subjects.
func ValidRunID(id string) error {
	return runid.Check(id)
}

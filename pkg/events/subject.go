package events

import (
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

// StreamName is the JetStream stream that keeps every run's events.
const StreamName = "AGENTMESH_RUNS"

// subjectPrefix starts every run event subject.
const subjectPrefix = "agentmesh.run."

// kindOneof describes the kind oneof of RunEvent.
var kindOneof = (&eventv1.RunEvent{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")

// Subject returns the subject of a run's event of the given kind:
// "agentmesh.run.<run_id>.<kind>". It does not check the run id; see runid.Check.
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

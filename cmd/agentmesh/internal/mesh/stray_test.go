package mesh_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
)

// TestWatchRunPastAStrayMessage: a message on a finished run's subjects that is none of its
// events (bytes published there by hand, the stream's last of the run) neither ends WatchRun
// nor keeps it from starting: every replica replays the run's events, and only them. The
// first message that did not decode ended every watch of the run; and a replica that does not
// hold the run looks up its last event before it watches, which failed STORAGE_ERROR.
func TestWatchRunPastAStrayMessage(t *testing.T) {
	h := startReplicas(t, nil, 2, nil)
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	want, _ := h.storedEvents(t, res.GetRunId())
	if _, err := h.jetStream(t).Publish(t.Context(), events.Subject(res.GetRunId(), "junk"), []byte("not a run event")); err != nil {
		t.Fatal(err)
	}
	for i, replica := range h.replicas {
		stream, err := replica.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: res.GetRunId()})
		if err != nil {
			t.Fatal(err)
		}
		got := received(t, stream)
		if len(got) != len(want) {
			t.Fatalf("replica %d: watched %d events, want the run's %d", i, len(got), len(want))
		}
		for j := range got {
			if !proto.Equal(got[j], want[j]) {
				t.Errorf("replica %d: event %d = %v, want %v", i, j, got[j], want[j])
			}
		}
	}
}

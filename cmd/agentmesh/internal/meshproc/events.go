package meshproc

import (
	"context"
	"testing"
	"time"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
)

// runSubjects returns the filter of every event subject of a run.
func runSubjects(runID string) string { return events.Subject(runID, ">") }

// CountEvents returns how many events of kind ("run_finished", "run_resumed", ...) the stream
// AGENTMESH_RUNS holds for the run, whoever published them.
func (m *Mesh) CountEvents(t testing.TB, runID, kind string) int {
	t.Helper()
	counts := m.subjectCounts(t, events.Subject(runID, kind))
	return int(counts[events.Subject(runID, kind)])
}

// StoredEvents returns every event the stream AGENTMESH_RUNS holds for the run now, in the
// order they were stored. It does not wait for more.
func (m *Mesh) StoredEvents(t testing.TB, runID string) []*eventv1.RunEvent {
	t.Helper()
	msgs := m.StoredMessages(t, runID)
	evs := make([]*eventv1.RunEvent, 0, len(msgs))
	for _, msg := range msgs {
		evs = append(evs, decode(t, msg))
	}
	return evs
}

// StoredMessages returns the NATS messages of every event the stream AGENTMESH_RUNS holds for
// the run now, headers included, in the order they were stored. It does not wait for more.
func (m *Mesh) StoredMessages(t testing.TB, runID string) []jetstream.Msg {
	t.Helper()
	var total uint64
	for _, n := range m.subjectCounts(t, runSubjects(runID)) {
		total += n
	}
	if total == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	next, stop := m.followMsgs(t, ctx, runSubjects(runID))
	defer stop()
	msgs := make([]jetstream.Msg, 0, total)
	for range total {
		msgs = append(msgs, next())
	}
	return msgs
}

// WaitEvent waits up to timeout until the stream AGENTMESH_RUNS holds an event of kind for the
// run, and returns the first one; it fails t when none comes.
func (m *Mesh) WaitEvent(t testing.TB, runID, kind string, timeout time.Duration) *eventv1.RunEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	next, stop := m.follow(t, ctx, events.Subject(runID, kind))
	defer stop()
	return next()
}

// follow reads the events stored on subjects, from the first one on, through an ordered
// consumer. next returns the following event, failing t when ctx ends first; stop ends the
// consumer. While the stream cannot be read (NATS restarting, the stream not created yet) it
// tries again until ctx ends.
func (m *Mesh) follow(t testing.TB, ctx context.Context, subjects string) (next func() *eventv1.RunEvent, stop func()) {
	t.Helper()
	nextMsg, stop := m.followMsgs(t, ctx, subjects)
	return func() *eventv1.RunEvent {
		t.Helper()
		return decode(t, nextMsg())
	}, stop
}

// followMsgs is follow for the messages themselves.
func (m *Mesh) followMsgs(t testing.TB, ctx context.Context, subjects string) (next func() jetstream.Msg, stop func()) {
	t.Helper()
	var cons jetstream.Consumer
	err := retry(ctx, nil, func() (err error) {
		cons, err = m.js.OrderedConsumer(ctx, events.StreamName, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subjects},
			DeliverPolicy:  jetstream.DeliverAllPolicy,
		})
		return err
	})
	if err != nil {
		t.Fatalf("consume %s: %v", subjects, err)
	}
	msgs, err := cons.Messages()
	if err != nil {
		t.Fatalf("consume %s: %v", subjects, err)
	}
	next = func() jetstream.Msg {
		t.Helper()
		msg, err := msgs.Next(jetstream.NextContext(ctx))
		if err != nil {
			t.Fatalf("no event on %s: %v", subjects, err)
		}
		return msg
	}
	return next, msgs.Stop
}

// decode returns the event msg carries; it fails t when msg holds none.
func decode(t testing.TB, msg jetstream.Msg) *eventv1.RunEvent {
	t.Helper()
	ev := &eventv1.RunEvent{}
	if err := proto.Unmarshal(msg.Data(), ev); err != nil {
		t.Fatalf("decode %s: %v", msg.Subject(), err)
	}
	return ev
}

// subjectCounts returns how many messages the stream holds on each subject matching filter.
func (m *Mesh) subjectCounts(t testing.TB, filter string) map[string]uint64 {
	t.Helper()
	stream, err := m.js.Stream(t.Context(), events.StreamName)
	if err != nil {
		t.Fatalf("stream %s: %v", events.StreamName, err)
	}
	info, err := stream.Info(t.Context(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatalf("stream %s: %v", events.StreamName, err)
	}
	return info.State.Subjects
}

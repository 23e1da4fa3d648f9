package events

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

func TestMain(m *testing.M) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	goleak.VerifyTestMain(m)
}

// testEnv is an embedded NATS server with a connection and a Publisher.
type testEnv struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	pub *Publisher
}

// newTestEnv starts an in-process NATS server with JetStream in a temporary directory.
func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	srv, err := StartEmbedded(EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(nc.Close)
	pub, err := NewPublisher(t.Context(), nc)
	if err != nil {
		t.Fatalf("NewPublisher: %v", err)
	}
	return &testEnv{nc: nc, js: pub.JetStream(), pub: pub}
}

// streamMsgs returns the number of messages the stream holds.
func (e *testEnv) streamMsgs(t *testing.T) uint64 {
	t.Helper()
	s, err := e.js.Stream(t.Context(), StreamName)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	return info.State.Msgs
}

// storedMsg returns the stream's message at stream sequence seq.
func (e *testEnv) storedMsg(t *testing.T, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := e.js.Stream(t.Context(), StreamName)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	msg, err := s.GetMsg(t.Context(), seq)
	if err != nil {
		t.Fatalf("GetMsg(%d): %v", seq, err)
	}
	return msg
}

// storedSeqs returns the seqs of the run's events the stream holds, in stream order; messages
// that are no event of the run are left out.
func storedSeqs(t *testing.T, js jetstream.JetStream, runID string) []uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), StreamName)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	var seqs []uint64
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		msg, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatalf("GetMsg(%d): %v", seq, err)
		}
		ev := &eventv1.RunEvent{}
		if proto.Unmarshal(msg.Data, ev) == nil && ev.GetRunId() == runID { // a stray message is no event
			seqs = append(seqs, ev.GetSeq())
		}
	}
	return seqs
}

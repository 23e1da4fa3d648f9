package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// RunStream numbers and publishes the events of one run. It is safe for concurrent use.
type RunStream struct {
	p     *Publisher
	runID string

	mu  sync.Mutex    // held by Emit: events are published one at a time
	seq atomic.Uint64 // the last seq used; written under mu
}

// Run returns the RunStream of a new run; its first event gets seq 1.
func (p *Publisher) Run(runID string) *RunStream {
	return NewRunStreamAt(p, runID, 0)
}

// NewRunStreamAt returns the RunStream of a resumed run whose last event had seq lastSeq (see
// LastSeq); its next event gets lastSeq+1.
func NewRunStreamAt(p *Publisher, runID string, lastSeq uint64) *RunStream {
	rs := &RunStream{p: p, runID: runID}
	rs.seq.Store(lastSeq)
	return rs
}

// RunID returns the run's id.
func (rs *RunStream) RunID() string { return rs.runID }

// Seq returns the last seq used: that of the last event stored, or of a later Emit that gave
// up. It does not wait for an Emit in progress.
func (rs *RunStream) Seq() uint64 { return rs.seq.Load() }

// Emit stamps a copy of ev with the run id, the next seq and (when unset) the current time,
// publishes it until JetStream has stored it and returns the event stored; ev itself is not
// modified. The event stored is the copy, or the copy cut down to the NATS payload limit (see
// Publisher.Publish): check RunFinished.ResultOmitted. The copy shares ev's payload (its kind's
// message), which is encoded before Emit returns: a caller that changes the payload later, or
// hands the event to another goroutine, copies it. Events are published one at a time in
// seq order, each in a producer span whose context the message carries (see Publish).
//
// A failed publish is retried with the same seq, after a backoff of 100 ms doubling up to 5 s
// or as soon as events can be stored again, for as long as ctx lives; the Nats-Msg-Id
// de-duplication makes that safe when an attempt was stored but its ack was lost. A seq is
// never reused: when Emit gives up (ctx ended, the connection closed) after an attempt, that
// seq counts as used and the next event takes the one after, so the run's stored seqs may
// have a gap but never two events with one seq. When the first attempt of a seq finds it
// already stored (a resumed run's lastSeq was behind), the event takes the next seq instead.
func (rs *RunStream) Emit(ctx context.Context, ev *eventv1.RunEvent) (*eventv1.RunEvent, error) {
	if ev == nil {
		return nil, stageerr.Invalid("event must not be nil")
	}
	out := stampable(ev)
	out.RunId = rs.runID
	if out.GetTime() == nil {
		out.Time = timestamppb.Now()
	}
	if err := checkEvent(out); err != nil {
		return nil, err
	}

	rs.mu.Lock()
	defer rs.mu.Unlock()
	for {
		out.Seq = rs.seq.Load() + 1
		pctx, span := startPublish(ctx, out)
		msg, stored, err := rs.p.prepare(pctx, out)
		if err != nil {
			endPublish(span, -1, err)
			return nil, err
		}
		taken, err := rs.p.store(pctx, msg, out)
		endPublish(span, len(msg.Data), err)
		rs.seq.Store(out.Seq)
		if err != nil {
			return nil, err
		}
		if !taken {
			return stored, nil
		}
		slog.WarnContext(ctx, "run event seq already stored; using the next one",
			"run_id", rs.runID, "seq", out.Seq, "kind", Kind(out))
	}
}

// stampable returns a new event with ev's fields, which shares ev's messages: an event's
// payload can be as large as a run's whole result, and copying it deeply cost an eightieth of
// the allocations of a run's turn (issue 15) for fields Emit never changes. The fields are
// copied by name, not by protobuf reflection, which took a hundredth of a lone turn's CPU;
// TestStampableCopiesEveryField fails when RunEvent gains a field this leaves out.
func stampable(ev *eventv1.RunEvent) *eventv1.RunEvent {
	return &eventv1.RunEvent{RunId: ev.GetRunId(), Seq: ev.GetSeq(), Time: ev.GetTime(), Kind: ev.Kind}
}

// LastSeq returns the seq of the last stored event of a run, 0 when the stream holds none
// (also when the stream itself is missing). A resumed run continues with
// NewRunStreamAt(p, runID, LastSeq(…)).
func LastSeq(ctx context.Context, js jetstream.JetStream, runID string) (uint64, error) {
	if err := ValidRunID(runID); err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last seq of run %s: %w", runID, err)
	}
	// The message-get API takes a wildcard "last_by_subj": nats-server loads the last message
	// of every subject matching it (file and memory stores alike). The stream does not allow
	// direct gets, so the client uses that API.
	msg, err := s.GetLastMsgForSubject(ctx, runFilter(runID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last seq of run %s: %w", runID, err)
	}
	ev := &eventv1.RunEvent{}
	if err := proto.Unmarshal(msg.Data, ev); err != nil {
		return 0, fmt.Errorf("last seq of run %s: decode %s: %w", runID, msg.Subject, err)
	}
	return ev.GetSeq(), nil
}

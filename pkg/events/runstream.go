package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// RunStream numbers and publishes the events of one run. It is safe for concurrent use.
//
// Its events can be fenced (WithOwner), so that two processes that both take themselves for
// the run's executor (one that stalled while another took the run over) never store their
// events in turn: the one whose Owner says the run is not its own gets ErrFenced.
type RunStream struct {
	p       *Publisher
	runID   string
	owns    Owner       // nil: never fenced
	fencing func() bool // nil: fenced whenever owns is set

	mu   sync.Mutex    // held by Emit: events are published one at a time
	seq  atomic.Uint64 // the last seq used; written under mu
	last uint64        // the stream sequence of the run's last stored event; under mu
}

// Run returns the RunStream of a new run; its first event gets seq 1.
func (p *Publisher) Run(runID string, opts ...RunOption) *RunStream {
	return NewRunStreamAt(p, runID, Position{}, opts...)
}

// NewRunStreamAt returns the RunStream of a resumed run whose last event is at (see
// LastPosition); its next event gets at.Seq+1.
func NewRunStreamAt(p *Publisher, runID string, at Position, opts ...RunOption) *RunStream {
	rs := &RunStream{p: p, runID: runID, last: at.StreamSeq}
	rs.seq.Store(at.Seq)
	for _, opt := range opts {
		opt(rs)
	}
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
// When JetStream refuses the event because of the fence, Emit settles why (see settle): it
// is stored, it goes again, or Emit fails with ErrFenced; reading the stream or the owner
// for it is retried as a publish is.
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
	wait := rs.p.retry.initial
	for refused := 0; ; {
		out.Seq = rs.seq.Load() + 1
		pctx, span := startPublish(ctx, out)
		msg, stored, err := rs.p.prepare(pctx, out)
		if err != nil {
			endPublish(span, -1, err)
			return nil, err
		}
		rs.fence(msg)
		ack, taken, err := rs.p.store(pctx, msg, out)
		endPublish(span, len(msg.Data), err)
		if isWrongLast(err) {
			refused++
			landed, serr := rs.settle(ctx, msg, out)
			switch {
			case serr == nil && landed:
				rs.seq.Store(out.Seq)
				return stored, nil
			case errors.Is(serr, ErrFenced):
				rs.seq.Store(out.Seq)
				return nil, serr
			case serr == nil && refused == 1:
				continue // the seq was not stored: it goes again, unless settle moved past it
			case serr == nil:
				serr = err // refused again at once: another writer goes on, or the store misbehaves
			}
			if !rs.p.retryAfter(ctx, &wait, "settling a refused run event failed; retrying", out, serr) {
				rs.seq.Store(out.Seq)
				return nil, fmt.Errorf("%w; gave up: %w", serr, ctx.Err())
			}
			continue
		}
		rs.seq.Store(out.Seq)
		if err != nil {
			return nil, err
		}
		rs.last = max(rs.last, ack.Sequence)
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

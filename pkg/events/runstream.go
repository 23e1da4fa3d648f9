package events

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// publishRetries is how many times Emit retries a failed publish.
const publishRetries = 3

// defaultRetryBackoff is the wait before the first retry; it doubles with every retry.
const defaultRetryBackoff = 100 * time.Millisecond

// RunStream numbers and publishes the events of one run. It is safe for concurrent use.
type RunStream struct {
	p       *Publisher
	runID   string
	backoff time.Duration

	mu  sync.Mutex
	seq uint64
}

// Run returns the RunStream of a new run; its first event gets seq 1.
func (p *Publisher) Run(runID string) *RunStream {
	return NewRunStreamAt(p, runID, 0)
}

// NewRunStreamAt returns the RunStream of a resumed run whose last published event had seq
// lastSeq; its next event gets lastSeq+1.
func NewRunStreamAt(p *Publisher, runID string, lastSeq uint64) *RunStream {
	return &RunStream{p: p, runID: runID, backoff: defaultRetryBackoff, seq: lastSeq}
}

// RunID returns the run's id.
func (rs *RunStream) RunID() string { return rs.runID }

// Seq returns the seq of the last event published.
func (rs *RunStream) Seq() uint64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.seq
}

// Emit stamps a copy of ev with the run id, the next seq and (when unset) the current time,
// publishes it and returns it; ev itself is not modified. Events are published one at a time
// in seq order, so seqs have no gaps even under concurrent Emit. A failed publish is retried
// up to 3 times with the same seq; the Nats-Msg-Id de-duplication makes that safe when an
// attempt was stored but its ack was lost. When the first attempt of a seq finds it already
// stored (an earlier Emit failed after all, or a resumed run's lastSeq was behind), the event
// takes the next seq instead.
func (rs *RunStream) Emit(ctx context.Context, ev *eventv1.RunEvent) (*eventv1.RunEvent, error) {
	if ev == nil {
		return nil, stageerr.Invalid("event must not be nil")
	}
	out := proto.Clone(ev).(*eventv1.RunEvent)
	out.RunId = rs.runID
	if out.GetTime() == nil {
		out.Time = timestamppb.Now()
	}
	if err := checkEvent(out); err != nil {
		return nil, err
	}

	rs.mu.Lock()
	defer rs.mu.Unlock()
	seq := rs.seq + 1
	fresh := true // no attempt with seq has been made yet
	wait := rs.backoff
	for failures := 0; ; {
		out.Seq = seq
		ack, err := rs.p.publish(ctx, out)
		if err == nil && ack.Duplicate && fresh {
			slog.WarnContext(ctx, "run event seq already stored; using the next one",
				"run_id", rs.runID, "seq", seq, "kind", Kind(out))
			seq++
			continue
		}
		if err == nil {
			rs.seq = seq
			return out, nil
		}
		fresh = false
		failures++
		if failures > publishRetries || ctx.Err() != nil {
			return nil, err
		}
		slog.WarnContext(ctx, "publishing run event failed; retrying",
			"run_id", rs.runID, "seq", seq, "kind", Kind(out), "attempt", failures, "err", err)
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
		wait *= 2
	}
}

// sleep waits for d or until ctx ends, returning ctx's error in that case.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

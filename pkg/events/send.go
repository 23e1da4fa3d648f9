package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

// Send is Emit without waiting for JetStream's ack: it publishes ev once the event sent before
// it is stored, and hands then the event stored once JetStream acks it, from a goroutine of
// its own (then must not block, nor call the RunStream). A run goes on with its work while the
// ack travels, instead of waiting a round trip to NATS for each event (issue 15).
//
// The events are still stored one at a time in seq order, each before the next is published:
// when the ack of an event says it failed, or does not come within the publish timeout, the
// next Send (or Emit, or Flush) publishes it again first, with Emit's retries and the same seq
// (the Nats-Msg-Id de-duplication stores it once when the first attempt did land), and calls
// then. An event whose first attempt finds its seq taken (a resumed run's last seq was behind)
// takes the next seq, as with Emit. The error returned is that of ev's own checks, or that of
// an earlier event given up (ctx ended, the connection closed); Flush returns that of the
// last.
func (rs *RunStream) Send(ctx context.Context, ev *eventv1.RunEvent, then func(*eventv1.RunEvent)) error {
	out, err := rs.stamp(ev)
	if err != nil {
		return err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	prev := rs.settle()
	out.Seq = rs.seq.Load() + 1
	pctx, span := startPublish(ctx, out)
	msg, stored, err := rs.p.prepare(pctx, out)
	if err != nil {
		endPublish(span, -1, err)
		return errors.Join(prev, err)
	}
	rs.seq.Store(out.Seq)
	p := &pending{ctx: ctx, out: out, msg: msg, stored: stored, then: then, done: make(chan struct{})}
	rs.pending = p
	fut, err := rs.p.js.PublishMsgAsync(msg)
	if err != nil {
		endPublish(span, len(msg.Data), err)
		p.err = err
		close(p.done)
		return prev
	}
	go rs.p.await(pctx, fut, span, p)
	return prev
}

// Flush waits until every event sent is stored or given up, publishing again what failed (see
// Send), and returns the error of one given up.
func (rs *RunStream) Flush() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.settle()
}

// pending is an event Send published whose outcome the stream has not settled yet.
type pending struct {
	ctx    context.Context         // Send's: a retry publishes under it
	out    *eventv1.RunEvent       // the event, stamped
	msg    *nats.Msg               // its message
	stored *eventv1.RunEvent       // what the message carries: out, or out cut down
	then   func(*eventv1.RunEvent) // called with stored once it is
	done   chan struct{}           // closed once the attempt's outcome is known, after then
	err    error                   // the attempt's failure
	taken  bool                    // the seq was stored already, by an earlier attempt
}

// await takes the outcome of e's attempt: its ack, its failure, or no ack within the publish
// timeout (or before ctx ends, which then says nothing of NATS).
func (p *Publisher) await(ctx context.Context, fut jetstream.PubAckFuture, span trace.Span, e *pending) {
	timer := time.NewTimer(publishTimeout)
	defer timer.Stop()
	var err error
	select {
	case ack := <-fut.Ok():
		e.taken = ack.Duplicate
	case err = <-fut.Err():
	case <-timer.C:
		err = fmt.Errorf("publish %s: no ack within %s", e.msg.Subject, publishTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	endPublish(span, len(e.msg.Data), err)
	if ctx.Err() == nil {
		p.ready.setStored(err == nil)
	}
	e.err = err
	if err == nil && !e.taken {
		if e.then != nil {
			e.then(e.stored)
		}
		// Nothing is left to do with the event: a run waiting on its model does not hold it.
		e.ctx, e.out, e.msg, e.stored, e.then = nil, nil, nil, nil, nil
	}
	close(e.done)
}

// settle waits for the outcome of the event Send published last; when it failed, it publishes
// it again until it is stored (the same seq), or with the next seq when its seq was taken, and
// calls its then. rs.mu is held.
func (rs *RunStream) settle() error {
	e := rs.pending
	if e == nil {
		return nil
	}
	rs.pending = nil
	<-e.done
	stored := e.stored
	switch {
	case e.taken:
		var err error
		if stored, err = rs.emit(e.ctx, e.out); err != nil {
			return err
		}
	case e.err != nil:
		// A duplicate now is the first attempt having landed after all: stored.
		if _, err := rs.p.store(e.ctx, e.msg, e.out); err != nil {
			return err
		}
	default:
		return nil
	}
	if e.then != nil {
		e.then(stored)
	}
	return nil
}

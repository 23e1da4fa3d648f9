package events

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// follow keeps p's readiness in step with nc until nc is closed. Events cannot be stored while
// nc is down; while nc is up but the last attempt to store failed, or nc has just come back,
// the stream is probed with backoff (and created again when missing) until it answers.
func (p *Publisher) follow(nc *nats.Conn) {
	statuses := nc.StatusChanged()
	p.ready.setConnected(nc.IsConnected())
	p.ready.setStored(true) // the stream has just been ensured
	go func() {
		defer nc.RemoveStatusListener(statuses)
		wait := p.retry.initial
		for {
			status := nc.Status()
			if status == nats.CLOSED {
				p.ready.setConnected(false)
				return
			}
			p.ready.setConnected(status == nats.CONNECTED)
			ready, changed := p.ready.get()
			var retry <-chan time.Time
			if status == nats.CONNECTED && !ready {
				err := p.probe()
				if err == nil {
					wait = p.retry.initial
					continue
				}
				if wait == p.retry.initial {
					slog.Warn("run events cannot be stored; probing the stream until they can", "stream", StreamName, "err", err)
				}
				retry = time.After(wait)
				wait = p.retry.next(wait)
			}
			select {
			case <-statuses:
			case <-changed:
			case <-retry:
			}
		}
	}()
}

// probe checks that the stream answers, creating it when it is missing, and records the
// outcome for Ready.
func (p *Publisher) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	_, err := p.js.Stream(ctx, StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = EnsureStream(ctx, p.js, p.stream)
	}
	p.ready.setStored(err == nil)
	return err
}

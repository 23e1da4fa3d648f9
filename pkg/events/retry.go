package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
)

// backoff is a capped exponential backoff: the first wait is initial, and every next one twice
// the last, up to ceiling.
type backoff struct {
	initial, ceiling time.Duration
}

// defaultBackoff retries after 100 ms, then 200 ms, 400 ms … and then every 5 s.
var defaultBackoff = backoff{initial: 100 * time.Millisecond, ceiling: 5 * time.Second}

// next returns the wait that follows d.
func (b backoff) next(d time.Duration) time.Duration { return min(2*d, b.ceiling) }

// store publishes msg, the message of ev, until JetStream acks it, for as long as ctx lives:
// a failed attempt is retried after a backoff, or as soon as events can be stored again. It
// returns the ack and reports whether the first attempt was acked as a duplicate, that is
// whether msg's id had been stored before this call; a later duplicate ack is an earlier
// attempt that was stored although its ack was lost. It gives up when ctx ends, on an error
// that retrying cannot mend, and when JetStream refuses a fenced message (see
// RunStream.fence), which the caller settles.
func (p *Publisher) store(ctx context.Context, msg *nats.Msg, ev *eventv1.RunEvent) (*jetstream.PubAck, bool, error) {
	wait := p.retry.initial
	for attempt := 1; ; attempt++ {
		ack, err := p.send(ctx, msg)
		if err == nil {
			if attempt > 1 {
				slog.InfoContext(ctx, "run event stored after failed attempts",
					"run_id", ev.GetRunId(), "seq", ev.GetSeq(), "kind", Kind(ev), "attempts", attempt)
			}
			return ack, attempt == 1 && ack.Duplicate, nil
		}
		if lasting(err) || isWrongLast(err) {
			return nil, false, err
		}
		if !p.retryAfter(ctx, &wait, "publishing run event failed; retrying", ev, err, "attempt", attempt) {
			return nil, false, fmt.Errorf("%w; gave up after %d attempts: %w", err, attempt, ctx.Err())
		}
	}
}

// retryAfter logs why an attempt for ev failed (with the log attributes attrs) and waits for
// *wait (see pause), which it moves on to the next backoff; it reports whether ctx still lives.
// After JetStream refused the attempt (refused), it waits the whole backoff.
func (p *Publisher) retryAfter(ctx context.Context, wait *time.Duration, why string, ev *eventv1.RunEvent, err error, attrs ...any) bool {
	if ctx.Err() != nil {
		return false
	}
	slog.WarnContext(ctx, why, append([]any{"run_id", ev.GetRunId(), "seq", ev.GetSeq(), "kind", Kind(ev), "retry_in", *wait, "err", err}, attrs...)...)
	p.pause(ctx, *wait, !refused(err))
	*wait = p.retry.next(*wait)
	return ctx.Err() == nil
}

// pause waits for d, or until ctx ends; with early, less when events become storable again
// meanwhile (NATS is back).
func (p *Publisher) pause(ctx context.Context, d time.Duration, early bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	var changed <-chan struct{}
	if early {
		_, changed = p.Ready()
	}
	for {
		select {
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		case <-changed:
			var ready bool
			if ready, changed = p.Ready(); ready {
				return
			}
		}
	}
}

// refused reports whether err is JetStream's answer refusing a message (an API error: the
// stream sealed or over its limits, the server's storage full, the account over its quota).
// The server answered, so the stream answers its probe (follow) at once and events look
// storable again: a retry woken by that would be refused again at once, in a tight loop of
// every run's events. A refused attempt waits its backoff out instead.
func refused(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr)
}

// lasting reports whether a publish error stays whatever the retries: the connection is
// closed for good, or the message is over the server's payload limit.
func lasting(err error) bool {
	return errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionDraining) ||
		errors.Is(err, nats.ErrMaxPayload)
}

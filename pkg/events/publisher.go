package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"google.golang.org/protobuf/proto"
)

// publishTimeout bounds one attempt to publish an event (or to probe the stream), the
// stream's re-creation included.
const publishTimeout = 5 * time.Second

// Publisher publishes run events to JetStream. It creates the stream AGENTMESH_RUNS again when
// NATS has lost it, cuts events down to the connection's payload limit, and tells whether
// events can be stored right now (Ready). It is safe for concurrent use.
type Publisher struct {
	js     jetstream.JetStream
	stream StreamOptions
	retry  backoff
	ready  readiness
	fences atomic.Int32 // whether the server fences a run's events (fencing)
}

// Option configures a Publisher.
type Option func(*Publisher)

// WithStream gives the stream these settings (by default those of the zero StreamOptions).
func WithStream(opts StreamOptions) Option {
	return func(p *Publisher) { p.stream = opts }
}

// NewPublisher returns a Publisher on nc, creating the stream AGENTMESH_RUNS or updating it to
// the Publisher's settings. The Publisher follows nc's status until nc is closed.
func NewPublisher(ctx context.Context, nc *nats.Conn, opts ...Option) (*Publisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	p := &Publisher{js: js, retry: defaultBackoff}
	for _, opt := range opts {
		opt(p)
	}
	if _, err := EnsureStream(ctx, js, p.stream); err != nil {
		if !nc.IsConnected() {
			return nil, fmt.Errorf("%w: not connected to NATS at %s", err, strings.Join(nc.Servers(), ", "))
		}
		return nil, err
	}
	p.follow(nc)
	return p, nil
}

// MaxAge returns how long the stream the Publisher ensures keeps an event (its MaxAge, or
// DefaultMaxAge).
func (p *Publisher) MaxAge() time.Duration { return p.stream.config().MaxAge }

// JetStream returns the JetStream context the Publisher publishes with, e.g. for Watch.
func (p *Publisher) JetStream() jetstream.JetStream { return p.js }

// Ready reports whether events can be stored right now: the connection to NATS is up and the
// last attempt to store since it came up succeeded. It also returns a channel that is closed
// when that changes. While events cannot be stored, the Publisher probes the stream with
// backoff (creating it when missing), so Ready turns true again without a publish.
func (p *Publisher) Ready() (bool, <-chan struct{}) { return p.ready.get() }

// Publish makes one attempt to publish ev on Subject(ev.RunId, Kind(ev)) and waits for
// JetStream's ack, in a producer span (see startPublish). The message carries the trace
// context of that span (traceparent, tracestate) injected with the global TextMapPropagator
// and the Nats-Msg-Id "<run_id>-<seq>", so publishing the same event again within
// DuplicateWindow stores it once. An event too large for one NATS message is cut down to fit:
// a run_finished event carries its result's summary (OmitResult), any other event its longest
// texts cut with a marker. When NATS answers that no stream takes the subject, the stream is
// created again and the event republished. An event without a valid run id, a seq or a kind is
// an INVALID_INPUT error.
func (p *Publisher) Publish(ctx context.Context, ev *eventv1.RunEvent) error {
	if err := checkEvent(ev); err != nil {
		return err
	}
	ctx, span := startPublish(ctx, ev)
	msg, _, err := p.prepare(ctx, ev)
	if err != nil {
		endPublish(span, -1, err)
		return err
	}
	_, err = p.send(ctx, msg)
	endPublish(span, len(msg.Data), err)
	return err
}

// prepare checks ev and returns its message and the event the message carries: ev itself, or
// ev cut down to the payload limit.
func (p *Publisher) prepare(ctx context.Context, ev *eventv1.RunEvent) (*nats.Msg, *eventv1.RunEvent, error) {
	if err := checkEvent(ev); err != nil {
		return nil, nil, err
	}
	if ev.GetSeq() == 0 {
		return nil, nil, stageerr.Invalid("event seq must not be zero")
	}
	msg := nats.NewMsg(Subject(ev.GetRunId(), Kind(ev)))
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(msg.Header))
	msg.Header.Set(jetstream.MsgIDHeader, msgID(ev))
	stored, err := fit(ev, payloadLimit(p.js.Conn(), msg.Header))
	if err != nil {
		return nil, nil, err
	}
	if msg.Data, err = proto.Marshal(stored); err != nil {
		return nil, nil, fmt.Errorf("encode %s event: %w", Kind(ev), err)
	}
	return msg, stored, nil
}

// send makes one attempt to publish msg and records its outcome for Ready (unless ctx ended,
// which says nothing of NATS).
func (p *Publisher) send(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	actx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	ack, err := p.js.PublishMsg(actx, msg)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		// No stream takes the subject: NATS restarted with an empty store, or the stream was
		// deleted.
		if _, serr := EnsureStream(actx, p.js, p.stream); serr != nil {
			err = fmt.Errorf("%w; %w", err, serr)
		} else {
			ack, err = p.js.PublishMsg(actx, msg)
		}
	}
	if ctx.Err() == nil {
		p.ready.setStored(err == nil || isWrongLast(err)) // a fenced event's refusal is an answer too
	}
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", msg.Subject, err)
	}
	return ack, nil
}

// checkEvent returns an INVALID_INPUT error when ev is nil, has no kind or an invalid run id.
func checkEvent(ev *eventv1.RunEvent) error {
	if ev == nil {
		return stageerr.Invalid("event must not be nil")
	}
	if Kind(ev) == "" {
		return stageerr.Invalid("event of run %q has no kind", ev.GetRunId())
	}
	return runid.Check(ev.GetRunId())
}

// msgID returns the Nats-Msg-Id of ev: "<run_id>-<seq>".
func msgID(ev *eventv1.RunEvent) string {
	return ev.GetRunId() + "-" + strconv.FormatUint(ev.GetSeq(), 10)
}

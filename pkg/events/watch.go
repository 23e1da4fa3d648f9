package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"google.golang.org/protobuf/proto"
)

// consumerCleanupTimeout bounds the deletion of Watch's consumer once it is done.
const consumerCleanupTimeout = 5 * time.Second

// errStreamReplaced says the stream a watch followed is gone and another one took its place.
var errStreamReplaced = errors.New("the event stream was replaced")

// Watch replays the events of a run from the stream and then follows new ones, calling fn for
// each event whose seq is greater than fromSeq, in order. The ctx given to fn carries the remote
// span context of the event's traceparent header, so spans started from it continue the run's
// trace. Watch returns nil right after the run_finished event (also when its seq is not greater
// than fromSeq), ctx.Err() when ctx ends, and fn's error when fn fails. A message on the run's
// subjects that is not one of its events (it does not decode as a RunEvent, or is another
// run's) is skipped and logged with its subject and stream sequence.
//
// A run whose first event kept is not its run_started lost its oldest events to the stream's
// limits (MaxAge, MaxBytes): when an event after fromSeq is among those lost, Watch fails
// FAILED_PRECONDITION naming the first seq kept and the fromSeq to watch from there (see
// startLost), instead of beginning mid-run as if the run began there.
//
// Watch holds at most watchBuffer bytes of events read ahead of fn (two NATS messages' worth),
// so a slow fn (a gRPC client that reads slowly) costs little memory.
//
// Watch rides out NATS outages. When NATS comes back without its store and the stream is
// created anew, Watch follows the new stream from its start, after the last event it delivered.
func Watch(ctx context.Context, js jetstream.JetStream, runID string, fromSeq uint64,
	fn func(ctx context.Context, ev *eventv1.RunEvent) error,
) error {
	if err := runid.Check(runID); err != nil {
		return err
	}
	if fn == nil {
		return stageerr.Invalid("watch callback must not be nil")
	}
	wait := defaultBackoff.initial
	first := true // no event of the run read yet
	for {
		err := watchStream(ctx, js, runID, &fromSeq, &first, fn)
		switch {
		case errors.Is(err, errStreamReplaced):
			// The new stream holds what the run published since: its start is in the old one.
			first = false
			slog.WarnContext(ctx, "run event stream replaced (NATS lost its store); watching the new one",
				"run_id", runID, "after_seq", fromSeq)
		case errors.Is(err, errSetup) && ctx.Err() == nil:
			// NATS is away (or reconnecting): look again after a backoff, for as long as ctx lives.
			slog.WarnContext(ctx, "watching run events failed; retrying", "run_id", runID, "retry_in", wait, "err", err)
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			wait = defaultBackoff.next(wait)
		default:
			return err
		}
	}
}

// errSetup marks a watch that could not reach the stream or create its consumer; it is tried
// again.
var errSetup = errors.New("setting up the watch failed")

// setupTimeout bounds each request that sets a watch up: a request lost while NATS reconnects
// fails after it, and is tried again, instead of waiting for the caller's whole deadline.
const setupTimeout = 5 * time.Second

// watchStream is Watch on the stream as it is now: it returns errStreamReplaced when NATS
// reconnects to a stream created after this one. It advances *fromSeq past every event
// delivered; *first says no event of the run was read yet, and is cleared at the first.
func watchStream(ctx context.Context, js jetstream.JetStream, runID string, fromSeq *uint64,
	first *bool, fn func(ctx context.Context, ev *eventv1.RunEvent) error,
) error {
	sctx, scancel := context.WithTimeout(ctx, setupTimeout)
	defer scancel()
	stream, err := js.Stream(sctx, StreamName)
	if err != nil {
		if ctx.Err() == nil {
			return fmt.Errorf("%w: %w", errSetup, err)
		}
		return watchErr(ctx, runID, err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := watchReplacement(ctx, js, stream.CachedInfo().Created, func() { cancel(errStreamReplaced) })
	defer stop()

	cons, err := stream.OrderedConsumer(sctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{runFilter(runID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		if ctx.Err() == nil {
			return fmt.Errorf("%w: %w", errSetup, err)
		}
		return watchErr(ctx, runID, err)
	}
	defer deleteConsumer(ctx, js, cons)
	msgs, err := cons.Messages(jetstream.PullMaxBytes(watchBuffer(js.Conn())))
	if err != nil {
		return watchErr(ctx, runID, err)
	}
	defer msgs.Stop()

	for {
		msg, err := msgs.Next(jetstream.NextContext(ctx))
		if err != nil {
			return watchErr(ctx, runID, err)
		}
		ev, err := runEvent(msg, runID)
		if err != nil {
			// One stray message must not end every watch of the run, on every replay, for as
			// long as the stream keeps it: it is no event of the run, so it is left out.
			var streamSeq uint64
			if md, merr := msg.Metadata(); merr == nil {
				streamSeq = md.Sequence.Stream
			}
			slog.WarnContext(ctx, "skipping a message on the run's subjects that is not one of its events",
				"run_id", runID, "subject", msg.Subject(), "stream_seq", streamSeq, "err", err)
			continue
		}
		if *first {
			*first = false
			if err := startLost(runID, ev, *fromSeq); err != nil {
				return err
			}
		}
		if ev.GetSeq() > *fromSeq {
			fctx := otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(msg.Headers()))
			if err := fn(fctx, ev); err != nil {
				return err
			}
			*fromSeq = ev.GetSeq()
		}
		if ev.GetRunFinished() != nil {
			return nil
		}
	}
}

// runEvent decodes msg, a message on the subjects of the run runID, as one of the run's
// events; it fails when msg does not decode as a RunEvent or is the event of another run.
func runEvent(msg jetstream.Msg, runID string) (*eventv1.RunEvent, error) {
	ev := &eventv1.RunEvent{}
	if err := proto.Unmarshal(msg.Data(), ev); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if ev.GetRunId() != runID {
		return nil, fmt.Errorf("the event is of run %q", ev.GetRunId())
	}
	return ev, nil
}

// watchReplacement calls replaced when, after a reconnection to NATS, the stream turns out to
// have been created after created (NATS came back without its store and the stream was created
// again; while it is missing, it is looked for with backoff). Calling stop ends the watch.
func watchReplacement(ctx context.Context, js jetstream.JetStream, created time.Time, replaced func()) (stop func()) {
	nc := js.Conn()
	reconnects := nc.StatusChanged(nats.CONNECTED)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-reconnects:
			case <-ctx.Done():
				return
			}
			if streamCreatedAfter(ctx, js, created) {
				replaced()
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
		nc.RemoveStatusListener(reconnects)
	}
}

// streamCreatedAfter reports whether the stream was created after created, looking for it
// with backoff while it is missing or does not answer, until ctx ends.
func streamCreatedAfter(ctx context.Context, js jetstream.JetStream, created time.Time) bool {
	for wait := defaultBackoff.initial; ; wait = defaultBackoff.next(wait) {
		s, err := js.Stream(ctx, StreamName)
		if err == nil {
			return s.CachedInfo().Created.After(created)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false
		}
	}
}

// watchErr returns errStreamReplaced or ctx's error when ctx has ended, err with the run's id
// otherwise.
func watchErr(ctx context.Context, runID string, err error) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errStreamReplaced) {
			return cause
		}
		return ctx.Err()
	}
	return fmt.Errorf("watch run %s: %w", runID, err)
}

// deleteConsumer removes Watch's consumer from the server right away instead of leaving it to
// the inactivity threshold.
func deleteConsumer(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), consumerCleanupTimeout)
	defer cancel()
	if err := js.DeleteConsumer(ctx, StreamName, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		slog.DebugContext(ctx, "deleting watch consumer failed", "consumer", info.Name, "err", err)
	}
}

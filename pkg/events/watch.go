package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"google.golang.org/protobuf/proto"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// consumerCleanupTimeout bounds the deletion of Watch's consumer once it is done.
const consumerCleanupTimeout = 5 * time.Second

// Watch replays the events of a run from the stream and then follows new ones, calling fn for
// each event whose seq is greater than fromSeq, in order. The ctx given to fn carries the remote
// span context of the event's traceparent header, so spans started from it continue the run's
// trace. Watch returns nil right after the run_finished event (also when its seq is not greater
// than fromSeq), ctx.Err() when ctx ends, and fn's error when fn fails.
func Watch(ctx context.Context, js jetstream.JetStream, runID string, fromSeq uint64,
	fn func(ctx context.Context, ev *eventv1.RunEvent) error,
) error {
	if err := ValidRunID(runID); err != nil {
		return err
	}
	if fn == nil {
		return stageerr.Invalid("watch callback must not be nil")
	}
	cons, err := js.OrderedConsumer(ctx, StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{runFilter(runID)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return watchErr(ctx, runID, err)
	}
	defer deleteConsumer(ctx, js, cons)
	msgs, err := cons.Messages()
	if err != nil {
		return watchErr(ctx, runID, err)
	}
	defer msgs.Stop()

	for {
		msg, err := msgs.Next(jetstream.NextContext(ctx))
		if err != nil {
			return watchErr(ctx, runID, err)
		}
		ev := &eventv1.RunEvent{}
		if err := proto.Unmarshal(msg.Data(), ev); err != nil {
			return fmt.Errorf("watch run %s: decode %s: %w", runID, msg.Subject(), err)
		}
		if ev.GetSeq() > fromSeq {
			fctx := otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(msg.Headers()))
			if err := fn(fctx, ev); err != nil {
				return err
			}
		}
		if ev.GetRunFinished() != nil {
			return nil
		}
	}
}

// watchErr returns ctx's error when ctx has ended, err with the run's id otherwise.
func watchErr(ctx context.Context, runID string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
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

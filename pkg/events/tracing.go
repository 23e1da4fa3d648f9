package events

import (
	"context"
	"errors"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
)

// tracerName is the instrumentation scope of the publish spans.
const tracerName = "github.com/agentmesh/agentmesh/pkg/events"

// startPublish starts the producer span of publishing ev, following the OpenTelemetry
// messaging conventions: named "publish agentmesh.run.{run_id}.<kind>" (the subject's
// template, so the name does not grow with the runs), with messaging.system "nats", the
// subject as messaging.destination.name and the Nats-Msg-Id as messaging.message.id. The
// message's headers carry the span's context, so a subscriber's spans link to it. The span
// comes from the tracer provider of ctx's span (the service publishing), else the global one.
func startPublish(ctx context.Context, ev *eventv1.RunEvent) (context.Context, trace.Span) {
	tp := otel.GetTracerProvider()
	if parent := trace.SpanFromContext(ctx); parent.SpanContext().IsValid() {
		tp = parent.TracerProvider()
	}
	template := Subject("{run_id}", Kind(ev))
	return tp.Tracer(tracerName).Start(ctx, "publish "+template,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("publish"),
			semconv.MessagingDestinationName(Subject(ev.GetRunId(), Kind(ev))),
			semconv.MessagingDestinationTemplate(template),
			semconv.MessagingMessageID(msgID(ev)),
			telemetry.RunIDKey.String(ev.GetRunId()),
		))
}

// endPublish records the size of the message published (size < 0: none was) and err, if any,
// with its error.type (publishErrorType), and ends span.
func endPublish(span trace.Span, size int, err error) {
	if size >= 0 {
		span.SetAttributes(semconv.MessagingMessageBodySize(size))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(publishErrorType(err)))
	}
	span.End()
}

// publishErrorType names the class of a failed publish for error.type, as the messaging
// conventions ask: the JetStream error code of a refusal (e.g. "10071", the fence's wrong last
// sequence), the stage failure code of an event that cannot be published (e.g.
// INVALID_INPUT), "connection_closed", "connection_draining", "max_payload", "timeout",
// "canceled", else "_OTHER".
func publishErrorType(err error) string {
	var apiErr *jetstream.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode != 0:
		return strconv.Itoa(int(apiErr.ErrorCode))
	case stageerr.As(err) != nil:
		return stageerr.CodeName(stageerr.As(err).Code)
	case errors.Is(err, nats.ErrConnectionClosed):
		return "connection_closed"
	case errors.Is(err, nats.ErrConnectionDraining):
		return "connection_draining"
	case errors.Is(err, nats.ErrMaxPayload):
		return "max_payload"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

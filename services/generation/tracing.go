package generation

import (
	"context"
	"errors"
	"fmt"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the service's spans.
const tracerName = "github.com/agentmesh/agentmesh/services/generation"

// attrCached marks the chat span of an answer from the response cache.
var attrCached = attribute.Key("agentmesh.generation.cached")

// startChat starts the "chat {model}" span of one answer, with the GenAI request attributes
// of the sampling actually sent: of kind client for a provider call, internal for an answer
// from the response cache.
func (s *Service) startChat(ctx context.Context, p Provider, req *generationv1.GenerateRequest,
	sampling *generationv1.Sampling, stream bool, kind trace.SpanKind,
) (context.Context, trace.Span) {
	model := req.GetTarget().GetModel()
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(p.Name()),
		semconv.GenAIRequestModel(model),
		semconv.GenAIRequestStream(stream),
	}
	if sampling != nil {
		if sampling.Temperature != nil {
			attrs = append(attrs, semconv.GenAIRequestTemperature(sampling.GetTemperature()))
		}
		if sampling.TopP != nil {
			attrs = append(attrs, semconv.GenAIRequestTopP(sampling.GetTopP()))
		}
		if n := sampling.GetMaxOutputTokens(); n > 0 {
			attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(n)))
		}
	}
	if id := req.GetRunId(); id != "" {
		attrs = append(attrs, telemetry.RunIDKey.String(id))
	}
	return s.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(kind),
		trace.WithAttributes(attrs...))
}

// cachedChat records the chat span of resp, an answer from the response cache: the request's
// attributes, the answer's model and finish reason and agentmesh.generation.cached, but no
// usage, since no provider was called (nor are the gen_ai metrics recorded).
func (s *Service) cachedChat(ctx context.Context, p Provider, req *generationv1.GenerateRequest,
	resp *generationv1.GenerateResponse, stream bool) {
	sampling := effectiveSampling(p, req.GetTarget().GetModel(), req.GetSampling())
	_, span := s.startChat(ctx, p, req, sampling, stream, trace.SpanKindInternal)
	span.SetAttributes(attrCached.Bool(true), semconv.GenAIResponseModel(resp.GetModel()),
		semconv.GenAIResponseFinishReasons(resp.GetStopReason()))
	span.End()
}

// endChat records the answer (or the failure) on the span and ends it.
func endChat(span trace.Span, resp *generationv1.GenerateResponse, err error) {
	if resp != nil {
		u := resp.GetUsage()
		span.SetAttributes(
			semconv.GenAIResponseModel(resp.GetModel()),
			semconv.GenAIUsageInputTokens(int(u.GetInput())),
			semconv.GenAIUsageOutputTokens(int(u.GetOutput())),
		)
		if resp.GetStopReason() != "" { // a broken-off answer (failChat) has none
			span.SetAttributes(semconv.GenAIResponseFinishReasons(resp.GetStopReason()))
		}
		if u.GetCached() > 0 {
			span.SetAttributes(semconv.GenAIUsageCacheReadInputTokens(int(u.GetCached())))
		}
	}
	endWithError(span, err)
}

// startEmbed starts the "embeddings {model}" client span of one embedding call.
func (s *Service) startEmbed(ctx context.Context, p Provider, model string) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, "embeddings "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.GenAIOperationNameEmbeddings,
		semconv.GenAIProviderNameKey.String(p.Name()),
		semconv.GenAIRequestModel(model),
	))
}

// endOnPanic, deferred by a call to provider p, ends the call's span with an error when p
// panics, and panics on: the server recovers the panic (the call fails with INTERNAL), and the
// span would otherwise never end. Ending an ended span again does nothing.
func endOnPanic(span trace.Span, p Provider) {
	if r := recover(); r != nil {
		endWithError(span, fmt.Errorf("provider %s panicked: %v", p.Name(), r))
		panic(r)
	}
}

// endWithError records err, if any, with an error.type attribute, and ends the span.
func endWithError(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
	}
	span.End()
}

// errorType names a failure for error.type: the generation error class (e.g. RATE_LIMITED),
// else the stage failure code (e.g. MAX_TOKENS_EXCEEDED), else "canceled", "timeout" or
// "_OTHER".
func errorType(err error) string {
	if e := stageerr.As(err); e != nil {
		if e.Class != typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED {
			return stageerr.ClassName(e.Class)
		}
		return stageerr.CodeName(e.Code)
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

package action

import (
	"context"
	"strings"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the service's spans.
const tracerName = "github.com/agentmesh/agentmesh/services/action"

// Span attributes of the service beyond the GenAI semantic conventions.
const (
	attrToolStatus  = attribute.Key("agentmesh.tool.status")
	attrCached      = attribute.Key("agentmesh.tool.cached")
	attrInterrupted = attribute.Key("agentmesh.tool.interrupted")
	attrAttempts    = attribute.Key("agentmesh.tool.attempts")
)

// startSpan starts the "execute_tool <name>" span of a call. Arguments and results stay out
// of spans: they may carry secrets.
func (s *Service) startSpan(ctx context.Context, req *actionv1.ExecuteRequest) (context.Context, trace.Span) {
	name := strings.TrimSpace("execute_tool " + req.GetToolName())
	return s.tracer.Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			semconv.GenAIOperationNameExecuteTool,
			semconv.GenAIToolName(req.GetToolName()),
			semconv.GenAIToolCallID(req.GetCallId()),
			telemetry.RunIDKey.String(req.GetRunId()),
		))
}

// refusedSpan starts the span of a request validateRequest refused: "execute_tool", with no
// attribute from the request, whose fields may be of any size (a span of megabytes is more
// than the exporter's batch may carry, and lost the spans exported with it).
func (s *Service) refusedSpan(ctx context.Context) trace.Span {
	_, span := s.tracer.Start(ctx, "execute_tool",
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(semconv.GenAIOperationNameExecuteTool))
	return span
}

// endSpan records how the call ended: the tool's status, or the refusal's code.
func endSpan(span trace.Span, resp *actionv1.ExecuteResponse, err error) {
	if err != nil {
		errorType := semconv.ErrorTypeOther.Value.AsString()
		if e := stageerr.As(err); e != nil {
			errorType = stageerr.CodeName(e.Code)
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType))
		span.SetStatus(codes.Error, errorType)
		return
	}
	span.SetAttributes(
		attrToolStatus.String(strings.ToLower(strings.TrimPrefix(resp.GetStatus().String(), "TOOL_STATUS_"))),
		attrCached.Bool(resp.GetCached()),
		attrAttempts.Int(int(resp.GetAttempts())),
	)
	if resp.GetInterrupted() {
		span.SetAttributes(attrInterrupted.Bool(true))
	}
	if code := resp.GetErrorCode(); code != typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED {
		span.SetAttributes(semconv.ErrorTypeKey.String(stageerr.CodeName(code)))
		span.SetStatus(codes.Error, stageerr.CodeName(code))
	}
}

package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ExporterFromEnv returns the span exporter the standard OTEL_* environment variables ask for,
// or nil (and no error) when tracing should not be exported.
//
// Nothing is exported when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, nor when
// neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (unless
// OTEL_TRACES_EXPORTER=otlp asks for the default endpoint). Otherwise the exporter is OTLP over
// the protocol of OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL: "grpc"
// (the default) or "http/protobuf". "http/json" is an error, as is any other value: the Go
// exporter has no JSON encoding, and sending protobuf to a collector asked for JSON would
// fail where the setting cannot be seen. Values are read as the OpenTelemetry specification
// reads an enum's, without case and surrounding white space ("OTLP", "GRPC"). The exporters
// read the remaining variables (headers, certificates, timeout, compression) themselves.
func ExporterFromEnv(ctx context.Context) (sdktrace.SpanExporter, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	kind := os.Getenv("OTEL_TRACES_EXPORTER")
	switch enumValue(kind) {
	case "none":
		return nil, nil
	case "":
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q is not supported: use otlp or none", kind)
	}
	variable := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	protocol := os.Getenv(variable)
	if protocol == "" {
		variable = "OTEL_EXPORTER_OTLP_PROTOCOL"
		protocol = os.Getenv(variable)
	}
	switch enumValue(protocol) {
	case "", "grpc":
		return otlptracegrpc.New(ctx)
	case "http/protobuf":
		return otlptracehttp.New(ctx)
	case "http/json":
		return nil, fmt.Errorf("%s=%q is not supported (the OpenTelemetry Go exporter has no JSON encoding): use grpc or http/protobuf", variable, protocol)
	}
	return nil, fmt.Errorf("%s=%q is not supported: use grpc or http/protobuf", variable, protocol)
}

// enumValue is an OTEL_* variable's enum value as the specification compares it: trimmed and
// in lower case.
func enumValue(v string) string { return strings.ToLower(strings.TrimSpace(v)) }

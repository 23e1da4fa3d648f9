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
// (the default), "http/protobuf" or "http/json". The exporters read the remaining variables
// (headers, certificates, timeout, compression) themselves.
func ExporterFromEnv(ctx context.Context) (sdktrace.SpanExporter, error) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	switch kind := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); kind {
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
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", "grpc":
		return otlptracegrpc.New(ctx)
	case "http/protobuf", "http/json":
		return otlptracehttp.New(ctx)
	}
	return nil, fmt.Errorf("OTLP protocol %q is not supported: use grpc, http/protobuf or http/json", protocol)
}

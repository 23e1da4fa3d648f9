// Package telemetry sets up OpenTelemetry tracing for the agentmesh binaries: a tracer provider
// per service, an OTLP exporter configured by the standard OTEL_* environment variables, the W3C
// propagators, and an in-memory Recorder for tests that need to see the spans; and OpenTelemetry
// metrics served as Prometheus text (ServeMetrics).
package telemetry

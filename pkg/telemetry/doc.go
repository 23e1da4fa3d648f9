// Package telemetry sets up OpenTelemetry tracing for the agentmesh binaries: a tracer provider
// per service, an OTLP exporter configured by the standard OTEL_* environment variables (or,
// with none, a forwarder that records no spans but passes trace context on: NewForwarder), the
// W3C propagators, and an in-memory Recorder for tests that need to see the spans; and
// OpenTelemetry metrics served as Prometheus text (ServeMetrics).
package telemetry

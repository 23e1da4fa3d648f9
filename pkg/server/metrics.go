package server

import (
	"context"
	"log/slog"
	"os"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// serveMetrics serves the metrics of the service binary name as Prometheus text on
// METRICS_ADDR (telemetry.MetricsPath), when it is set, as the Prometheus web configuration
// METRICS_WEB_CONFIG names says (TLS, basic authentication; plain HTTP without), and makes
// their meter provider the global one, which the service's instruments record through. It
// returns that provider (nil without METRICS_ADDR: nothing is recorded) and the function that
// stops serving. A web configuration that does not load is a telemetry.ErrWebConfig error.
func serveMetrics(name string, log *slog.Logger) (metric.MeterProvider, func(), error) {
	addr := os.Getenv("METRICS_ADDR")
	if addr == "" {
		return nil, func() {}, nil
	}
	m, err := telemetry.ServeMetrics("agentmesh-"+name, telemetry.MetricsListener{Addr: addr, WebConfig: os.Getenv("METRICS_WEB_CONFIG"), Log: log.With("listener", "metrics")})
	if err != nil {
		return nil, nil, err
	}
	otel.SetMeterProvider(m.Provider())
	log.Info("serving metrics", "addr", m.Addr(), "path", telemetry.MetricsPath)
	return m.Provider(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), FlushTimeout)
		defer cancel()
		if err := m.Shutdown(ctx); err != nil {
			log.Warn("stopping metrics", "err", err)
		}
	}, nil
}

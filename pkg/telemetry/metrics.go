package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// MetricsPath is the HTTP path the metrics are served on.
const MetricsPath = "/metrics"

// Metrics is a meter provider whose metrics are served as Prometheus text: the OpenTelemetry
// Prometheus exporter over a registry of its own (with the Go runtime and process
// collectors), on MetricsPath of a plain HTTP listener. The metrics carry no secrets, no run
// and no user ids; the listener does not authenticate its callers.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	lis      net.Listener
	srv      *http.Server
	served   chan struct{}
}

// ServeMetrics records the metrics of service (the resource's service.name) and serves them
// on addr (e.g. ":9464", or "127.0.0.1:0" for a free loopback port) until Shutdown.
func ServeMetrics(service, addr string) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("metrics exporter: %w", err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen on %q: %w", addr, err)
	}
	// Merging a schemaless resource cannot conflict, so Merge never fails here.
	res, _ := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &Metrics{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res)),
		lis:      lis,
		srv:      &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		served:   make(chan struct{}),
	}
	go func() {
		defer close(m.served)
		_ = m.srv.Serve(lis) // ErrServerClosed after Shutdown
	}()
	return m, nil
}

// Provider returns the meter provider whose instruments are served.
func (m *Metrics) Provider() *sdkmetric.MeterProvider { return m.provider }

// Addr returns the address the metrics are served on (the real port when asked for port 0).
func (m *Metrics) Addr() string { return m.lis.Addr().String() }

// Shutdown stops the listener, waiting for scrapes in progress until ctx ends, and the meter
// provider.
func (m *Metrics) Shutdown(ctx context.Context) error {
	err := m.srv.Shutdown(ctx)
	<-m.served
	return errors.Join(err, m.provider.Shutdown(ctx))
}

package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// MetricsPath is the HTTP path the metrics are served on.
const MetricsPath = "/metrics"

// Metrics is a meter provider whose metrics are served as Prometheus text: the OpenTelemetry
// Prometheus exporter over a registry of its own (with the Go runtime and process
// collectors), on MetricsPath of an HTTP listener (see MetricsListener). The metrics carry no
// secrets, no run and no user ids, and no peer addresses.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	lis      net.Listener
	srv      *http.Server
	served   chan struct{}
}

// MetricsListener is where and how Metrics are served.
type MetricsListener struct {
	// Addr is the address to listen on, e.g. ":9464", or "127.0.0.1:0" for a free loopback port.
	Addr string
	// WebConfig, when set, names a Prometheus web configuration file, as Prometheus's own
	// exporters take it (github.com/prometheus/exporter-toolkit): tls_server_config serves
	// HTTPS (with client certificates when it asks for them), basic_auth_users asks for basic
	// authentication (bcrypt hashes). The file is read again for every connection, so a
	// rotated certificate is served without a restart. Without it the listener is plain HTTP
	// and does not authenticate its callers.
	WebConfig string
	// Log gets the listener's messages; nil discards them.
	Log *slog.Logger
}

// ErrWebConfig is the error of a MetricsListener.WebConfig that does not load.
var ErrWebConfig = errors.New("metrics web configuration")

// ServeMetrics records the metrics of service (the resource's service.name) and serves them
// as l says until Shutdown. A web configuration that does not load (a missing or malformed
// file, a certificate that does not load, a password that is not a bcrypt hash) is an
// ErrWebConfig error, before anything listens. Errors carry the exit code of the process they
// stop (exitcode.Of): exitcode.Invalid for the web configuration, exitcode.Unavailable for an
// address that cannot be listened on.
func ServeMetrics(service string, l MetricsListener) (*Metrics, error) {
	if err := web.Validate(l.WebConfig); err != nil {
		return nil, exitcode.Wrap(exitcode.Invalid, fmt.Errorf("%w %q: %w", ErrWebConfig, l.WebConfig, err))
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("metrics exporter: %w", err))
	}
	lis, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Unavailable, fmt.Errorf("metrics: listen on %q: %w", l.Addr, err))
	}
	// Merging a schemaless resource cannot conflict, so Merge never fails here.
	res, _ := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &Metrics{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res),
			sdkmetric.WithView(views)),
		lis:    lis,
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		served: make(chan struct{}),
	}
	noSystemdSocket := false
	flags := &web.FlagConfig{WebListenAddresses: &[]string{lis.Addr().String()}, WebSystemdSocket: &noSystemdSocket, WebConfigFile: &l.WebConfig}
	go func() {
		defer close(m.served)
		_ = web.Serve(lis, m.srv, flags, log) // ErrServerClosed after Shutdown
	}()
	return m, nil
}

// noPeer drops the peer's address from every metric: the gRPC client instrumentation labels
// rpc.client.call.duration with the address and port each call connected to (in a cluster a
// pod's), a label whose values grow with every pod a caller ever reaches. Its exemplars
// leave them out too: an exemplar keeps the attributes a view drops, and a scrape in the
// protobuf format, which carries exemplars, served the peer's address in their labels.
var noPeer = sdkmetric.NewView(sdkmetric.Instrument{Name: "*"}, sdkmetric.Stream{
	AttributeFilter:                   peerDropped,
	ExemplarReservoirProviderSelector: withoutDropped,
})

// peerDropped is noPeer's filter: every attribute but the peer's address and port.
var peerDropped = attribute.NewDenyKeysFilter(semconv.ServerAddressKey, semconv.ServerPortKey)

// withoutDropped selects the default exemplar reservoir of agg, wrapped in noDropped.
func withoutDropped(agg sdkmetric.Aggregation) exemplar.ReservoirProvider {
	provider := sdkmetric.DefaultExemplarReservoirProviderSelector(agg)
	return func(kept attribute.Set) exemplar.Reservoir { return noDropped{provider(kept)} }
}

// noDropped is an exemplar reservoir that keeps none of the attributes a view dropped from a
// measurement: its exemplars carry the trace and span ids only.
type noDropped struct{ exemplar.Reservoir }

// Offer offers the measurement to the reservoir without its dropped attributes.
func (r noDropped) Offer(ctx context.Context, t time.Time, v exemplar.Value,
	_ []attribute.KeyValue) {
	r.Reservoir.Offer(ctx, t, v, nil)
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

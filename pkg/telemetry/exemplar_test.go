package telemetry_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestExemplarsNameNoPeer: a scrape in Prometheus's protobuf format, which carries exemplars,
// finds the client call's exemplar with its trace and span ids but not the address and port
// of the peer it called, which the metrics leave out (the rpc_client_call_duration_seconds
// labels never name the peer); the exemplars carried them, as the attributes the view drops.
func TestExemplarsNameNoPeer(t *testing.T) {
	listener := telemetry.MetricsListener{Addr: "127.0.0.1:0"}
	m, err := telemetry.ServeMetrics("agentmesh-test", listener)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown(context.WithoutCancel(t.Context()))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Error(err)
		}
	}()
	tp := sdktrace.NewTracerProvider() // samples every root: the call's span is an exemplar's
	defer tp.Shutdown(context.WithoutCancel(t.Context()))
	conn, err := dial.New(lis.Addr().String(),
		dial.WithMeterProvider(m.Provider()), dial.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	checker := healthpb.NewHealthClient(conn)
	if _, err := checker.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	url := "http://" + m.Addr() + telemetry.MetricsPath
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var exemplars []*dto.Exemplar
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if mf.GetName() != "rpc_client_call_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			exemplars = append(exemplars, s.GetHistogram().GetExemplars()...)
			for _, b := range s.GetHistogram().GetBucket() {
				if b.GetExemplar() != nil {
					exemplars = append(exemplars, b.GetExemplar())
				}
			}
		}
	}
	if len(exemplars) == 0 {
		t.Fatal("rpc_client_call_duration_seconds has no exemplar")
	}
	for _, e := range exemplars {
		labels := map[string]string{}
		for _, l := range e.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		peer := labels["server_address"] != "" || labels["server_port"] != ""
		if labels["trace_id"] == "" || peer {
			t.Errorf("exemplar labels %v, want trace_id and span_id, not the peer's", labels)
		}
	}
}

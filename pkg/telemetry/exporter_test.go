package telemetry_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	collectortracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

func TestExporterFromEnvDisabled(t *testing.T) {
	const endpoint = "http://127.0.0.1:4318"
	table := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{name: "nothing set", env: nil},
		{name: "exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_EXPORTER": "none"}},
		// The specification compares an enum's values without case, as SamplerFromEnv does.
		{name: "exporter None", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_TRACES_EXPORTER": " None"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SDK_DISABLED": "TRUE"}},
		{name: "unknown protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL="carrier-pigeon" is not supported: use grpc or http/protobuf`},
		// Accepted before, and the spans went out as protobuf all the same.
		{name: "JSON", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json" is not supported (the OpenTelemetry Go exporter has no JSON encoding): use grpc or http/protobuf`},
		{name: "JSON for traces", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			wantErr: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json" is not supported`},
		{name: "unknown exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin" is not supported`},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			exp, err := telemetry.ExporterFromEnv(t.Context())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || exp != nil {
				t.Fatalf("ExporterFromEnv = %v, %v; want no exporter and no error", exp, err)
			}
		})
	}
}

func TestExporterFromEnvHTTP(t *testing.T) {
	table := []struct {
		name     string
		env      func(url string) map[string]string
		wantPath string
	}{
		{"base endpoint", func(url string) map[string]string {
			return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
		}, "/v1/traces"},
		{"traces endpoint and protocol win", func(url string) map[string]string {
			return map[string]string{
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url + "/collect/traces",
				"OTEL_EXPORTER_OTLP_PROTOCOL":        "grpc",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
			}
		}, "/collect/traces"},
		{"values in capitals", func(url string) map[string]string {
			return map[string]string{
				"OTEL_TRACES_EXPORTER": "OTLP", "OTEL_EXPORTER_OTLP_ENDPOINT": url,
				"OTEL_EXPORTER_OTLP_PROTOCOL": "HTTP/Protobuf",
			}
		}, "/v1/traces"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan string, 8)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Method + " " + r.URL.Path
				w.Header().Set("Content-Type", "application/x-protobuf")
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			setEnv(t, tc.env(srv.URL))

			exportOneSpan(t)

			select {
			case req := <-got:
				if want := "POST " + tc.wantPath; req != want {
					t.Errorf("collector got %q, want %q", req, want)
				}
			default:
				t.Fatal("the collector received nothing after ForceFlush")
			}
		})
	}
}

func TestExporterFromEnvGRPC(t *testing.T) {
	collector := &collector{got: make(chan int, 8)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	collectortracev1.RegisterTraceServiceServer(srv, collector)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	defer func() {
		srv.Stop()
		<-done
	}()
	// No protocol variable: gRPC is the default.
	setEnv(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + lis.Addr().String()})

	exportOneSpan(t)

	select {
	case n := <-collector.got:
		if n != 1 {
			t.Errorf("collector got %d spans, want 1", n)
		}
	default:
		t.Fatal("the gRPC collector received nothing after ForceFlush")
	}
}

// exportOneSpan ends one span through a provider batching into ExporterFromEnv's exporter,
// flushes it and shuts the provider down.
func exportOneSpan(t *testing.T) {
	t.Helper()
	exp, err := telemetry.ExporterFromEnv(t.Context())
	if err != nil || exp == nil {
		t.Fatalf("ExporterFromEnv = %v, %v; want an exporter", exp, err)
	}
	tp := telemetry.NewExportingProvider("agentmesh-test", exp, nil)
	defer func() {
		if err := tp.Shutdown(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	_, span := tp.Tracer("test").Start(t.Context(), "work")
	span.End()
	if err := tp.ForceFlush(t.Context()); err != nil {
		t.Fatalf("ForceFlush: %v", err)
	}
}

// collector is an OTLP gRPC trace collector that reports how many spans each export carried.
type collector struct {
	collectortracev1.UnimplementedTraceServiceServer
	got chan int
}

func (c *collector) Export(_ context.Context, req *collectortracev1.ExportTraceServiceRequest) (*collectortracev1.ExportTraceServiceResponse, error) {
	n := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	c.got <- n
	return &collectortracev1.ExportTraceServiceResponse{}, nil
}

package server

import (
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/metricstest"
	"go.opentelemetry.io/otel/metric"
)

// TestREADMENamesTheRPCMetrics: the README's table of metrics has a row for each metric of a
// service's gRPC server and of its clients of other services, and each of its rows served by
// every service or by the service binaries' clients is one.
func TestREADMENamesTheRPCMetrics(t *testing.T) {
	served := metricstest.Exposed(t, func(mp metric.MeterProvider) {
		New(Options{MeterProvider: mp}).GRPC().Stop()
		conn, err := dial.New("127.0.0.1:1", dial.WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Close(); err != nil {
			t.Error(err)
		}
	})
	metricstest.CheckREADME(t, filepath.Join("..", "..", "README.md"), served, "every service", "the service binaries")
}

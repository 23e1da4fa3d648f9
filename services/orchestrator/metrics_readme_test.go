package orchestrator

import (
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/metricstest"
	"go.opentelemetry.io/otel/metric"
)

// TestREADMENamesTheMetrics: the README's table of metrics has a row for each metric the
// orchestrator serves, and each of its rows served by the orchestrator is one.
func TestREADMENamesTheMetrics(t *testing.T) {
	served := metricstest.Exposed(t, func(mp metric.MeterProvider) { newInstruments(mp) })
	metricstest.CheckREADME(t, filepath.Join("..", "..", "README.md"), served, "orchestrator:")
}

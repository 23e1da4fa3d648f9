package action

import (
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/metricstest"
	"github.com/agentmesh/agentmesh/services/action/queue"
	"go.opentelemetry.io/otel/metric"
)

// TestREADMENamesTheMetrics: the README's table of metrics has a row for each metric the action
// stage serves (its own and its queues'), and each of its rows served by the action stage is one.
func TestREADMENamesTheMetrics(t *testing.T) {
	served := metricstest.Exposed(t, func(mp metric.MeterProvider) {
		newInstruments(mp)
		if _, err := queue.New(nil, mp); err != nil {
			t.Fatal(err)
		}
	})
	metricstest.CheckREADME(t, filepath.Join("..", "..", "README.md"), served, "action:")
}

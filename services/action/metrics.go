package action

import (
	"context"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// MetricToolDuration is the histogram of how long tool executions took, from the moment they
// got their queue slot to their response, by tool and status; its count is the number of
// executions. Calls answered from the ledger did not execute and are not in it.
const MetricToolDuration = "agentmesh.action.tool.duration"

// toolStatusKey is the attribute of an execution's status: success, error or timeout.
const toolStatusKey = attribute.Key("agentmesh.tool.status")

// toolBuckets are the bucket boundaries of MetricToolDuration, in seconds.
var toolBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// instruments are the service's metric instruments, beyond the queues' own.
type instruments struct {
	toolDuration metric.Float64Histogram
}

// newInstruments makes the instruments of mp (the global provider when nil). An instrument
// the provider refuses is reported to otel.Handle and records nothing.
func newInstruments(mp metric.MeterProvider) *instruments {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	d, err := mp.Meter(tracerName).Float64Histogram(MetricToolDuration, metric.WithUnit("s"),
		metric.WithDescription("How long tool executions took, by tool and status."),
		metric.WithExplicitBucketBoundaries(toolBuckets...))
	if err != nil {
		otel.Handle(err)
	}
	return &instruments{toolDuration: d}
}

// executed records one execution of the tool, started at start, that ended with status. The
// tool is a registered one: tool names from requests never reach a metric.
func (in *instruments) executed(ctx context.Context, tool string, status typev1.ToolStatus, start time.Time) {
	in.toolDuration.Record(context.WithoutCancel(ctx), time.Since(start).Seconds(), metric.WithAttributes(
		semconv.GenAIToolName(tool),
		toolStatusKey.String(strings.ToLower(strings.TrimPrefix(status.String(), "TOOL_STATUS_"))),
	))
}

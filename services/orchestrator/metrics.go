package orchestrator

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The orchestrator's metrics.
const (
	// MetricActiveRuns is the up-down counter of the runs executing on this replica (started or
	// resumed here, until they finish, pause or move to another replica).
	MetricActiveRuns = "agentmesh.run.active"
	// MetricFinishedRuns is the counter of finished runs, by outcome and exit reason.
	MetricFinishedRuns = "agentmesh.run.finished"
	// MetricRunTurns is the histogram of the turns a finished run took, by outcome.
	MetricRunTurns = "agentmesh.run.turns"
)

// The attributes of the run metrics: the run's outcome (e.g. OUTCOME_SUCCESS) and exit reason
// (e.g. COMPLETED), both from fixed sets.
const (
	outcomeKey    = attribute.Key("agentmesh.run.outcome")
	exitReasonKey = attribute.Key("agentmesh.run.exit_reason")
)

// turnBuckets are the bucket boundaries of MetricRunTurns.
var turnBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100}

// instruments are the orchestrator's metric instruments.
type instruments struct {
	active   metric.Int64UpDownCounter
	finished metric.Int64Counter
	turns    metric.Int64Histogram
}

// newInstruments makes the instruments of mp (the global provider when nil). An instrument
// the provider refuses is reported to otel.Handle and records nothing.
func newInstruments(mp metric.MeterProvider) *instruments {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	var in instruments
	var errs [3]error
	in.active, errs[0] = m.Int64UpDownCounter(MetricActiveRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Runs executing on this orchestrator replica."))
	in.finished, errs[1] = m.Int64Counter(MetricFinishedRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Finished runs, by outcome and exit reason."))
	in.turns, errs[2] = m.Int64Histogram(MetricRunTurns, metric.WithUnit("{turn}"),
		metric.WithDescription("Turns a finished run took."), metric.WithExplicitBucketBoundaries(turnBuckets...))
	for _, err := range errs {
		if err != nil {
			otel.Handle(err)
		}
	}
	return &in
}

// runFinished counts a run that finished on this replica, with its turns.
func (in *instruments) runFinished(ctx context.Context, outcome, exitReason string, turns int32) {
	ctx = context.WithoutCancel(ctx)
	in.finished.Add(ctx, 1, metric.WithAttributes(outcomeKey.String(outcome), exitReasonKey.String(exitReason)))
	in.turns.Record(ctx, int64(turns), metric.WithAttributes(outcomeKey.String(outcome)))
}

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
	// MetricAdoptedRuns is the counter of the runs this replica took over, by reason: "lease
	// expired" (their owner's heartbeat was gone), "handed off" (their owner shut down or
	// gave them up) or "replica restarted" (this replica's own, from before a restart).
	MetricAdoptedRuns = "agentmesh.run.adopted"
	// MetricHeartbeatLapses is the counter of the times this replica found its heartbeat
	// lapsed (it or NATS stalled for the TTL), when other replicas may have taken its runs.
	MetricHeartbeatLapses = "agentmesh.replica.heartbeat_lapses"
)

// The attributes of the run metrics: the run's outcome (e.g. OUTCOME_SUCCESS) and exit reason
// (e.g. COMPLETED), both from fixed sets.
const (
	outcomeKey    = attribute.Key("agentmesh.run.outcome")
	exitReasonKey = attribute.Key("agentmesh.run.exit_reason")
	adoptedWhyKey = attribute.Key("agentmesh.run.adopt_reason")
)

// turnBuckets are the bucket boundaries of MetricRunTurns.
var turnBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100}

// instruments are the orchestrator's metric instruments.
type instruments struct {
	active   metric.Int64UpDownCounter
	finished metric.Int64Counter
	turns    metric.Int64Histogram
	adopted  metric.Int64Counter
	lapses   metric.Int64Counter
}

// newInstruments makes the instruments of mp (the global provider when nil). An instrument
// the provider refuses is reported to otel.Handle and records nothing.
func newInstruments(mp metric.MeterProvider) *instruments {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	var in instruments
	var errs [5]error
	in.active, errs[0] = m.Int64UpDownCounter(MetricActiveRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Runs executing on this orchestrator replica."))
	in.finished, errs[1] = m.Int64Counter(MetricFinishedRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Finished runs, by outcome and exit reason."))
	in.turns, errs[2] = m.Int64Histogram(MetricRunTurns, metric.WithUnit("{turn}"),
		metric.WithDescription("Turns a finished run took."), metric.WithExplicitBucketBoundaries(turnBuckets...))
	in.adopted, errs[3] = m.Int64Counter(MetricAdoptedRuns, metric.WithUnit("{run}"),
		metric.WithDescription("Runs this orchestrator replica took over, by reason."))
	in.lapses, errs[4] = m.Int64Counter(MetricHeartbeatLapses, metric.WithUnit("{lapse}"),
		metric.WithDescription("Times this orchestrator replica found its heartbeat lapsed."))
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

// runAdopted counts a run this replica took over, for reason.
func (in *instruments) runAdopted(ctx context.Context, reason string) {
	in.adopted.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(adoptedWhyKey.String(reason)))
}

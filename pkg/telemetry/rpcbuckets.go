package telemetry

import (
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// rpcDurations are the gRPC call duration histograms of otelgrpc, whose buckets rpcBuckets
// replaces.
var rpcDurations = map[string]bool{
	"rpc.server.call.duration": true,
	"rpc.client.call.duration": true,
}

// rpcBuckets are the bucket boundaries of the gRPC call durations, in seconds: otelgrpc's,
// which end at 10 s, and then one at each default timeout of the mesh's longer calls, a tool
// call's (30 s), the planning model's (60 s), a model's answer (120 s) and a run's, which the
// public API's Run and StreamRun last (600 s), with 300 s between. Past 10 s every call fell
// in +Inf, and a quantile of the stages that wait on models and tools read 10 s.
var rpcBuckets = []float64{
	0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
	30, 60, 120, 300, 600,
}

// views is the meter provider's view of every instrument: noPeer's, with rpcBuckets for the
// gRPC call durations. One view, for a second that matched an instrument too would make it a
// second stream.
func views(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
	s, ok := noPeer(i)
	if ok && rpcDurations[i.Name] {
		s.Aggregation = sdkmetric.AggregationExplicitBucketHistogram{Boundaries: rpcBuckets}
	}
	return s, ok
}

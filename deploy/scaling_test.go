package deploy

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/events"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/metricstest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestScalingMetricsFromStart runs each stage whose autoscaler scales on a Pods custom metric
// (scalingMetrics) with the dev overlay's environment, and scrapes its metrics once it serves,
// before any call: every metric its HorizontalPodAutoscaler names must have a series already.
// A pod without one is a pod the custom metrics API has no value for: while no pod of the
// stage had served a call (a new rollout of a quiet stage) the autoscaler failed to get the
// metric, reported FailedGetPodsMetric, and would not scale the stage down.
func TestScalingMetricsFromStart(t *testing.T) {
	r := render(t, "k8s/overlays/dev")
	for _, name := range slices.Sorted(maps.Keys(scalingMetrics)) {
		t.Run(name, func(t *testing.T) {
			nats, err := events.StartEmbedded(events.EmbeddedOptions{StoreDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nats.Shutdown)
			metrics := grpctest.FreeAddr(t)
			svc := startService(t, r, name, nats.ClientURL(), metrics)
			grpctest.WaitHealth(t, svc.health, healthpb.HealthCheckResponse_SERVING)
			for _, metric := range scalingMetrics[name] {
				var m metricstest.Families
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					if m = metricstest.Scrape(t, metrics); len(m.Series(metric, nil)) > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s serves no %s before its first call, which its "+
							"HorizontalPodAutoscaler scales on (families %s)", name, metric, m)
					}
				}
				if v := m.Value(metric, nil); v != 0 {
					t.Errorf("%s: %s is %v before any call, want 0", name, metric, v)
				}
			}
		})
	}
}

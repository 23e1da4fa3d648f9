package generation_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestDurationBucketsReachTheStepTimeout: gen_ai.client.operation.duration has buckets up to
// the longest a model's answer may take by default, the step timeout (120 s). The
// semantic conventions' advice ends at 81.92 s, so that every answer between that and the
// timeout, a slow reasoning model's, fell in +Inf with those that never came.
func TestDurationBucketsReachTheStepTimeout(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Match: "*", Turns: []llmtest.Turn{{Content: "hi"}}})
	reader := sdkmetric.NewManualReader()
	client := serve(t, generation.Options{
		Providers:     map[string]generation.Provider{"openai": openAIAt(t, srv.URL(), nil)},
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if _, err := client.Generate(t.Context(), request("openai", "gpt-test", user("x"))); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	step := time.Duration(config.Default().Defaults.StepTimeoutMS) * time.Millisecond
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if m.Name != "gen_ai.client.operation.duration" || !ok {
				continue
			}
			for _, dp := range h.DataPoints {
				found = true
				if b := dp.Bounds; len(b) == 0 || b[len(b)-1] < step.Seconds() {
					t.Errorf("%s's buckets end below the %v step timeout: %v", m.Name, step, b)
				}
			}
		}
	}
	if !found {
		t.Fatal("no gen_ai.client.operation.duration recorded")
	}
}

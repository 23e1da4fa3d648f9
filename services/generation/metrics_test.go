package generation_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/generation"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
)

// points returns the data points of every metric reader has, by metric name, each as its
// attributes ("key=value,...") → its value (a histogram's count and sum as two values).
func points(t *testing.T, reader *sdkmetric.ManualReader) map[string]map[string][]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]float64{}
	key := func(set attribute.Set) string {
		s := ""
		for _, kv := range set.ToSlice() {
			s += string(kv.Key) + "=" + kv.Value.String() + ","
		}
		return s
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			byAttrs := map[string][]float64{}
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					byAttrs[key(dp.Attributes)] = []float64{float64(dp.Count), float64(dp.Sum)}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					byAttrs[key(dp.Attributes)] = []float64{float64(dp.Count), dp.Sum}
				}
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					byAttrs[key(dp.Attributes)] = []float64{float64(dp.Value)}
				}
			case metricdata.Sum[float64]:
				for _, dp := range d.DataPoints {
					byAttrs[key(dp.Attributes)] = []float64{dp.Value}
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					byAttrs[key(dp.Attributes)] = []float64{float64(dp.Value)}
				}
			}
			out[m.Name] = byAttrs
		}
	}
	return out
}

// TestFailuresAndEmbeddingsMetrics: a rate-limited call is timed with its error type and still
// reports the headroom its response announced (Anthropic's headers); an embedding call counts
// input tokens only; no call stays in flight.
func TestFailuresAndEmbeddingsMetrics(t *testing.T) {
	srv := llmtest.New(t, llmtest.Scenario{Name: "limited", Match: "*", Turns: []llmtest.Turn{{
		Failure: llmtest.FailRateLimit, RateLimit: &llmtest.RateLimit{RemainingRequests: 0, RemainingTokens: 1234},
	}}})
	reader := sdkmetric.NewManualReader()
	client := serve(t, generation.Options{
		Providers: map[string]generation.Provider{
			"claude": anthropicAt(t, srv.URL(), func(o *generation.AnthropicOptions) { o.Name = "claude" }),
			"embed":  openAIAt(t, srv.URL(), func(o *generation.OpenAIOptions) { o.Name = "embed" }),
		},
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	_, err := client.Generate(t.Context(), request("claude", "sonnet", user("x")))
	if se := stageError(t, err, codes.ResourceExhausted); se.Class != typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED {
		t.Fatalf("class %v, want RATE_LIMITED", se.Class)
	}
	if _, err := client.Embed(t.Context(), &generationv1.EmbedRequest{Target: &typev1.Target{Provider: "embed", Model: "e1"}, Inputs: []string{"some text"}}); err != nil {
		t.Fatal(err)
	}

	p := points(t, reader)
	chat := "error.type=RATE_LIMITED,gen_ai.operation.name=chat,gen_ai.provider.name=claude,gen_ai.request.model=sonnet,"
	if d := p[generation.MetricRemainingRequests]["gen_ai.provider.name=claude,gen_ai.request.model=sonnet,"]; len(d) != 1 || d[0] != 0 {
		t.Errorf("remaining requests %v, want 0", p[generation.MetricRemainingRequests])
	}
	if d := p[generation.MetricRemainingTokens]["gen_ai.provider.name=claude,gen_ai.request.model=sonnet,"]; len(d) != 1 || d[0] != 1234 {
		t.Errorf("remaining tokens %v, want 1234", p[generation.MetricRemainingTokens])
	}
	if d := p["gen_ai.client.operation.duration"][chat]; len(d) != 2 || d[0] != 1 {
		t.Errorf("durations %v, want one rate-limited chat call", p["gen_ai.client.operation.duration"])
	}
	tokens := p["gen_ai.client.token.usage"]
	if len(tokens) != 1 {
		t.Fatalf("token usage %v, want the embedding's input only", tokens)
	}
	for attrs, d := range tokens {
		if attrs != "gen_ai.operation.name=embeddings,gen_ai.provider.name=embed,gen_ai.request.model=e1,gen_ai.token.type=input," || d[0] != 1 || d[1] <= 0 {
			t.Errorf("token usage %s %v, want one embedding's input tokens", attrs, d)
		}
	}
	for attrs, d := range p[generation.MetricActiveRequests] {
		if d[0] != 0 {
			t.Errorf("%s: %v calls in flight after they ended", attrs, d[0])
		}
	}
}

// TestModelLabelsAreBounded: past the first 100 provider/model pairs, calls are labelled with
// the model _OTHER, so made-up model names cannot add series without end.
func TestModelLabelsAreBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	client := serve(t, generation.Options{
		Providers:     map[string]generation.Provider{"custom": failing{err: errors.New("no such model")}},
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	for i := range 105 {
		_, _ = client.Generate(t.Context(), request("custom", fmt.Sprintf("model-%d", i), user("x")))
	}
	_, _ = client.Generate(t.Context(), request("custom", "model-7", user("x")))
	durations := points(t, reader)["gen_ai.client.operation.duration"]
	if len(durations) != 101 {
		t.Errorf("%d series, want 100 models and _OTHER", len(durations))
	}
	prefix := "error.type=GENERATION_FAILED,gen_ai.operation.name=chat,gen_ai.provider.name=failing,gen_ai.request.model="
	if d := durations[prefix+"_OTHER,"]; len(d) != 2 || d[0] != 5 {
		t.Errorf("_OTHER: %v, want the 5 calls past the bound", d)
	}
	if d := durations[prefix+"model-7,"]; len(d) != 2 || d[0] != 2 {
		t.Errorf("model-7: %v, want its 2 calls, the second after the bound was reached", d)
	}
}

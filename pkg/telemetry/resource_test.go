package telemetry_test

import (
	"maps"
	"os"
	"strconv"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/telemetry"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// TestSpansNameTheirInstance proves that spans carry service.instance.id, so the replicas of a
// service differ in Jaeger: the replica's name, else the host and process, and
// OTEL_RESOURCE_ATTRIBUTES wins over both (spans recorded for an exporter).
func TestSpansNameTheirInstance(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	table := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"host and pid", nil, host + "-" + strconv.Itoa(os.Getpid())},
		{"replica name", map[string]string{"AGENTMESH_REPLICA": "b"}, "b"},
		{"resource attributes win", map[string]string{"AGENTMESH_REPLICA": "b", "OTEL_RESOURCE_ATTRIBUTES": "service.instance.id=pod-7,team=platform"}, "pod-7"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			env := collectorEnv(t)
			maps.Copy(env, tc.env)
			setEnv(t, env)
			tp, shutdown, err := telemetry.Setup(t.Context(), "agentmesh-orchestrator")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = shutdown(t.Context()) }()
			_, span := tp.Tracer("test").Start(t.Context(), "work")
			span.End()
			attrs := span.(sdktrace.ReadOnlySpan).Resource().Set()
			if v, _ := attrs.Value(semconv.ServiceInstanceIDKey); v.AsString() != tc.want {
				t.Errorf("service.instance.id = %q, want %q", v.AsString(), tc.want)
			}
			if v, _ := attrs.Value(semconv.ServiceNameKey); v.AsString() != "agentmesh-orchestrator" {
				t.Errorf("service.name = %q, want agentmesh-orchestrator", v.AsString())
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// maxTracesFlag is the flag that caps the memory store of the Jaeger image's all-in-one
// configuration, before its number of traces.
const maxTracesFlag = "--set=extensions.jaeger_storage.backends.some_storage.memory.max_traces="

// TestDeployedJaegerKeepsItsTraceCap runs the Jaeger binary as the Kubernetes base's Jaeger
// Deployment runs the image (its embedded all-in-one configuration and the Deployment's
// args; deploy's tests hold the overlays and Compose to the same args), sends it a few
// more traces than its cap, and reads back that the newest are kept and the oldest gone: the
// flag names the store the image's configuration has, and Jaeger takes it. Without the cap
// it keeps 100,000 traces, past the Deployment's memory limit.
func TestDeployedJaegerKeepsItsTraceCap(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Jaeger as a separate process")
	}
	args := deployedJaegerArgs(t)
	limit := -1
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, maxTracesFlag); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				t.Fatalf("Jaeger's arg %q: want a number of traces above 0", a)
			}
			limit = n
		}
	}
	if limit < 0 {
		t.Fatalf("Jaeger's args %q have no %s", args, maxTracesFlag)
	}
	jaeger := meshproc.StartJaegerAllInOne(t, args)

	const service, beyond = "trace-cap", 5
	exp, err := otlptracegrpc.New(t.Context(),
		otlptracegrpc.WithEndpoint(jaeger.OTLPAddr()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ids := make([]trace.TraceID, limit+beyond)
	send := func(from, to int) {
		for i := from; i < to; i++ {
			_, span := tp.Tracer("cap").Start(t.Context(), "trace "+strconv.Itoa(i))
			ids[i] = span.SpanContext().TraceID()
			span.End()
		}
		if err := tp.ForceFlush(t.Context()); err != nil {
			t.Fatalf("sending the spans: %v", err)
		}
	}
	// Jaeger stores the traces of one batch in no set order: the oldest go first, and are
	// stored, before the cap's number of newer ones.
	send(0, beyond)
	for _, id := range ids[:beyond] {
		jaeger.WaitTrace(t, id.String(), time.Minute, func(*meshproc.JaegerTrace) error { return nil })
	}
	send(beyond, len(ids))
	// Jaeger refuses to search deeper than its cap: the newest are the ones found.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.After(time.Minute); ; {
		missing := newestMissing(jaeger.Traces(t, service, limit), ids[beyond:])
		if missing < 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("trace %d of %d is not found, want the newest %d kept",
				beyond+missing, len(ids), limit)
		}
	}
	for i, id := range ids[:beyond] {
		if jaeger.HasTrace(t, id.String()) {
			t.Fatalf("trace %d of %d is kept, want the oldest %d gone past the cap, %d",
				i, len(ids), beyond, limit)
		}
	}
}

// newestMissing returns the index in ids of the first trace that found does not have, or -1.
func newestMissing(found []*meshproc.JaegerTrace, ids []trace.TraceID) int {
	in := make(map[string]bool, len(found))
	for _, tr := range found {
		in[tr.TraceID] = true
	}
	for i, id := range ids {
		if !in[id.String()] {
			return i
		}
	}
	return -1
}

// deployedJaegerArgs returns the args of the jaeger container of deploy/k8s/base/jaeger.yaml's
// Deployment.
func deployedJaegerArgs(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "k8s", "base", "jaeger.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for doc := range bytes.SplitSeq(data, []byte("\n---\n")) {
		var d appsv1.Deployment
		if err := yaml.Unmarshal(doc, &d); err != nil {
			t.Fatalf("deploy/k8s/base/jaeger.yaml: %v", err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "jaeger" {
				return c.Args
			}
		}
	}
	t.Fatal("deploy/k8s/base/jaeger.yaml has no Deployment with a container jaeger")
	return nil
}

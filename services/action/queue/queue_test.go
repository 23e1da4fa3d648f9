package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/services/action/queue"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newSet returns queues recording into a manual reader.
func newSet(t *testing.T, limits map[string]int) (*queue.Set, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	s, err := queue.New(limits, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, reader
}

// depth returns the recorded depth of each queue.
func depth(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != queue.MetricDepth {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || sum.IsMonotonic {
				t.Fatalf("%s is %T (monotonic %v), want a non-monotonic int64 sum", m.Name, m.Data, ok && sum.IsMonotonic)
			}
			for _, dp := range sum.DataPoints {
				name, _ := dp.Attributes.Value(attribute.Key("queue"))
				out[name.AsString()] = dp.Value
			}
		}
	}
	return out
}

// waitDepth polls until the named queue's depth is want.
func waitDepth(t *testing.T, reader *sdkmetric.ManualReader, name string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for depth(t, reader)[name] != want {
		if time.Now().After(deadline) {
			t.Fatalf("queue %s depth = %d, want %d", name, depth(t, reader)[name], want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNew(t *testing.T) {
	s, _ := newSet(t, map[string]int{"slow": 1})
	if names := strings.Join(s.Names(), ","); names != "default,slow" {
		t.Errorf("Names = %s, want the default queue added", names)
	}
	for _, tc := range []struct {
		limits map[string]int
		want   string
	}{
		{map[string]int{"slow": 0}, `queue "slow": concurrency must be at least 1, got 0`},
		{map[string]int{"": 1}, "queue names must not be empty"},
	} {
		if _, err := queue.New(tc.limits, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) error = %v, want %q", tc.limits, err, tc.want)
		}
	}
	if _, err := s.Acquire(t.Context(), "nope"); err == nil || !strings.Contains(err.Error(), `unknown queue "nope"`) {
		t.Errorf("Acquire on an unknown queue: %v", err)
	}
}

func TestLimitAndDepth(t *testing.T) {
	s, reader := newSet(t, map[string]int{"one": 1})
	first, err := s.Acquire(t.Context(), "one")
	if err != nil {
		t.Fatal(err)
	}
	waitDepth(t, reader, "one", 1)

	acquired := make(chan func(), 2)
	for range 2 {
		go func() {
			release, err := s.Acquire(context.Background(), "one")
			if err != nil {
				t.Error(err)
				return
			}
			acquired <- release
		}()
	}
	waitDepth(t, reader, "one", 3) // one running, two waiting
	notAcquired := func(when string) {
		t.Helper()
		select {
		case <-acquired:
			t.Fatalf("%s: a second call holds a slot of a queue of 1", when)
		default:
		}
	}
	notAcquired("while the first runs")

	// The default queue is independent of a full one.
	other, err := s.Acquire(t.Context(), queue.Default)
	if err != nil {
		t.Fatal(err)
	}
	if d := depth(t, reader)[queue.Default]; d != 1 {
		t.Errorf("default depth = %d while held, want 1", d)
	}
	other()

	first()
	first() // a second release does nothing
	second := <-acquired
	waitDepth(t, reader, "one", 2)
	notAcquired("while the second runs")
	second()
	(<-acquired)()
	waitDepth(t, reader, "one", 0)
	if d := depth(t, reader)[queue.Default]; d != 0 {
		t.Errorf("default depth = %d after release", d)
	}
	if w := waits(t, reader); w["one"] != 3 || w[queue.Default] != 1 {
		t.Errorf("waits measured %v, want 3 on one and 1 on default", w)
	}
}

func TestCancelledWait(t *testing.T) {
	s, reader := newSet(t, map[string]int{"one": 1})
	hold, err := s.Acquire(t.Context(), "one")
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	ctx, cancel := context.WithCancel(t.Context())
	failed := make(chan error, 1)
	go func() {
		_, err := s.Acquire(ctx, "one")
		failed <- err
	}()
	waitDepth(t, reader, "one", 2)
	cancel()
	if err := <-failed; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire = %v, want context.Canceled", err)
	}
	waitDepth(t, reader, "one", 1)
	if n := waits(t, reader)["one"]; n != 1 {
		t.Errorf("%d waits measured, want 1: the cancelled wait got no slot", n)
	}
}

// waits returns the number of waits measured on each queue.
func waits(t *testing.T, reader *sdkmetric.ManualReader) map[string]uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != queue.MetricWait {
				continue
			}
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is %T, want a float64 histogram", m.Name, m.Data)
			}
			for _, dp := range h.DataPoints {
				name, _ := dp.Attributes.Value(attribute.Key("queue"))
				out[name.AsString()] = dp.Count
			}
		}
	}
	return out
}

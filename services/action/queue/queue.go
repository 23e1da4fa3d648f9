// Package queue holds the named queues tool executions wait in: each queue admits at most its
// concurrency limit of executions at once, in arrival order, and queues are independent of
// each other, so a slow queue never delays a fast one. Each queue's depth (executions waiting
// plus running) is exported as the OpenTelemetry metric agentmesh.action.queue.depth, and how
// long executions waited for a slot as agentmesh.action.queue.wait.duration.
package queue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"golang.org/x/sync/semaphore"
)

// Default is the queue tools run on when they name none; a Set always has it.
const Default = "default"

// DefaultConcurrency is the limit of the default queue when the limits do not set one.
const DefaultConcurrency = 8

// MetricDepth is the name of the up-down counter of executions waiting in or running on a
// queue; its "queue" attribute names the queue.
const MetricDepth = "agentmesh.action.queue.depth"

// MetricWait is the name of the histogram of how long executions waited for a slot of a queue,
// in seconds, counting those that got one; its "queue" attribute names the queue.
const MetricWait = "agentmesh.action.queue.wait.duration"

// waitBuckets are the bucket boundaries of MetricWait.
var waitBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// meterName is the instrumentation scope of the queue metrics.
const meterName = "github.com/agentmesh/agentmesh/services/action/queue"

// Set is a fixed set of named queues. It is safe for concurrent use.
type Set struct {
	queues map[string]*queue
	depth  metric.Int64UpDownCounter
	wait   metric.Float64Histogram
}

// queue is one named queue: a weighted semaphore of its concurrency limit.
type queue struct {
	sem   *semaphore.Weighted
	attrs metric.MeasurementOption
}

// New returns the queues of limits (name → concurrency, each at least 1), plus Default with
// DefaultConcurrency when limits lack it. The depth metric is recorded through mp; nil means
// the global meter provider.
func New(limits map[string]int, mp metric.MeterProvider) (*Set, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(meterName)
	depth, err := meter.Int64UpDownCounter(MetricDepth,
		metric.WithDescription("Tool executions waiting in or running on the queue."),
		metric.WithUnit("{execution}"))
	if err != nil {
		return nil, fmt.Errorf("queue depth metric: %w", err)
	}
	wait, err := meter.Float64Histogram(MetricWait,
		metric.WithDescription("How long tool executions waited for a slot of the queue."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(waitBuckets...))
	if err != nil {
		return nil, fmt.Errorf("queue wait metric: %w", err)
	}
	s := &Set{queues: make(map[string]*queue, len(limits)+1), depth: depth, wait: wait}
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		n := limits[name]
		if name == "" {
			return nil, fmt.Errorf("queue names must not be empty")
		}
		if n < 1 {
			return nil, fmt.Errorf("queue %q: concurrency must be at least 1, got %d", name, n)
		}
		s.queues[name] = newQueue(name, n)
	}
	if _, ok := s.queues[Default]; !ok {
		s.queues[Default] = newQueue(Default, DefaultConcurrency)
	}
	// Each queue's depth is served from the start, at 0: the action stage's autoscaler
	// scales on it, and a pod without the series has no value for the custom metrics API.
	for _, q := range s.queues {
		depth.Add(context.Background(), 0, q.attrs)
	}
	return s, nil
}

func newQueue(name string, limit int) *queue {
	return &queue{
		sem:   semaphore.NewWeighted(int64(limit)),
		attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("queue", name))),
	}
}

// Has reports whether the set has a queue named name.
func (s *Set) Has(name string) bool {
	_, ok := s.queues[name]
	return ok
}

// Names returns the queue names, sorted.
func (s *Set) Names() []string {
	return slices.Sorted(maps.Keys(s.queues))
}

// Acquire waits for a free slot on the named queue, in arrival order, and returns the function
// that frees it; call it exactly once, when the execution has finished (later calls do
// nothing). While waiting, ctx's cancellation or deadline ends the wait with ctx's error and
// no slot.
func (s *Set) Acquire(ctx context.Context, name string) (release func(), err error) {
	q, ok := s.queues[name]
	if !ok {
		return nil, fmt.Errorf("unknown queue %q (queues: %v)", name, s.Names())
	}
	// The context of the metric is not the caller's: a cancelled caller must still be
	// counted out.
	bg := context.WithoutCancel(ctx)
	s.depth.Add(bg, 1, q.attrs)
	waiting := time.Now()
	if err := q.sem.Acquire(ctx, 1); err != nil {
		s.depth.Add(bg, -1, q.attrs)
		return nil, err
	}
	s.wait.Record(bg, time.Since(waiting).Seconds(), q.attrs)
	var once sync.Once
	return func() {
		once.Do(func() {
			q.sem.Release(1)
			s.depth.Add(bg, -1, q.attrs)
		})
	}, nil
}

package action_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/action/queue"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gate is a tool body that reports each entry on entered and returns when released.
type gate struct {
	entered chan string
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan string, 10), release: make(chan struct{})}
}

func (g *gate) body(ctx context.Context, call action.Call) (string, error) {
	g.entered <- call.CallID
	select {
	case <-g.release:
		return "done " + call.CallID, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// queuedTool returns a fake tool on the named queue.
func queuedTool(name, queueName string, fn func(context.Context, action.Call) (string, error)) *fakeTool {
	tool := newFakeTool(name, fn)
	tool.def.Queue = queueName
	return tool
}

// queueDepth returns the recorded depth of the named queue.
func queueDepth(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != queue.MetricDepth || !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				if v, _ := dp.Attributes.Value(attribute.Key("queue")); v.AsString() == name {
					return dp.Value
				}
			}
		}
	}
	return 0
}

// waitQueueDepth polls the metric until the named queue's depth is want.
func waitQueueDepth(t *testing.T, reader *sdkmetric.ManualReader, name string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for queueDepth(t, reader, name) != want {
		if time.Now().After(deadline) {
			t.Fatalf("queue %s depth = %d, want %d", name, queueDepth(t, reader, name), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// serveQueued serves tools with queues, recording metrics in the returned reader.
func serveQueued(t *testing.T, queues map[string]int, tools ...action.Tool) (actionv1.ActionServiceClient, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	client := serve(t, action.Options{
		Tools:         tools,
		Queues:        queues,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	return client, reader
}

// result is the outcome of an Execute run in the background.
type result struct {
	resp *actionv1.ExecuteResponse
	err  error
}

// executeAsync runs Execute in the background.
func executeAsync(ctx context.Context, client actionv1.ActionServiceClient, req *actionv1.ExecuteRequest) chan result {
	out := make(chan result, 1)
	go func() {
		resp, err := client.Execute(ctx, req)
		out <- result{resp, err}
	}()
	return out
}

func TestQueueOfOneRunsCallsOneAfterTheOther(t *testing.T) {
	g := newGate()
	tool := queuedTool("serial", "one", g.body)
	client, reader := serveQueued(t, map[string]int{"one": 1}, tool)

	first := executeAsync(t.Context(), client, request(t, "serial", nil))
	firstID := <-g.entered
	second := executeAsync(t.Context(), client, request(t, "serial", nil))
	waitQueueDepth(t, reader, "one", 2) // one running, one waiting
	select {
	case id := <-g.entered:
		t.Fatalf("call %s started while %s held the only slot", id, firstID)
	default:
	}

	g.release <- struct{}{}
	if r := <-first; r.err != nil || r.resp.GetResult() != "done "+firstID {
		t.Fatalf("first call: %v %v", r.resp, r.err)
	}
	secondID := <-g.entered
	waitQueueDepth(t, reader, "one", 1)
	g.release <- struct{}{}
	if r := <-second; r.err != nil || r.resp.GetResult() != "done "+secondID {
		t.Fatalf("second call: %v %v", r.resp, r.err)
	}
	waitQueueDepth(t, reader, "one", 0)
	if n := tool.calls.Load(); n != 2 {
		t.Errorf("tool ran %d times, want 2", n)
	}
}

func TestSlowQueueDoesNotDelayAnother(t *testing.T) {
	g := newGate()
	slow := queuedTool("slow_report", "slow", g.body)
	fast := queuedTool("fast_lookup", "fast", returns("quick"))
	client, reader := serveQueued(t, map[string]int{"slow": 1, "fast": 1}, slow, fast)

	running := executeAsync(t.Context(), client, request(t, "slow_report", nil))
	<-g.entered
	waiting := executeAsync(t.Context(), client, request(t, "slow_report", nil))
	waitQueueDepth(t, reader, "slow", 2)

	// The slow queue is full and has a waiter; the fast queue answers at once.
	resp, err := client.Execute(t.Context(), request(t, "fast_lookup", nil))
	if err != nil || resp.GetResult() != "quick" {
		t.Fatalf("fast call: %v %v", resp, err)
	}
	if d := queueDepth(t, reader, "slow"); d != 2 {
		t.Errorf("slow depth = %d during the fast call, want 2 (still blocked)", d)
	}

	g.release <- struct{}{}
	<-g.entered
	g.release <- struct{}{}
	for _, ch := range []chan result{running, waiting} {
		if r := <-ch; r.err != nil || r.resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS {
			t.Fatalf("slow call: %v %v", r.resp, r.err)
		}
	}
}

func TestCancelledWhileQueued(t *testing.T) {
	for name, ledger := range map[string]func(t *testing.T) action.Ledger{
		"in memory": func(*testing.T) action.Ledger { return action.NewMemoryLedger(10) },
		"in NATS":   func(t *testing.T) action.Ledger { return kvLedger(t, natsServer(t), action.KVLedgerOptions{}) },
	} {
		t.Run(name, func(t *testing.T) {
			g := newGate()
			tool := queuedTool("serial", "one", g.body)
			ledger := ledger(t)
			reader := sdkmetric.NewManualReader()
			client := serve(t, action.Options{Tools: []action.Tool{tool}, Queues: map[string]int{"one": 1}, Ledger: ledger,
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})

			holder := executeAsync(t.Context(), client, request(t, "serial", nil))
			<-g.entered
			queued := request(t, "serial", nil)
			ctx, cancel := context.WithCancel(t.Context())
			waiting := executeAsync(ctx, client, queued)
			waitQueueDepth(t, reader, "one", 2)
			cancel()
			if r := <-waiting; status.Code(r.err) != codes.Canceled {
				t.Fatalf("cancelled call: %v %v, want CANCELLED", r.resp, r.err)
			}
			waitQueueDepth(t, reader, "one", 1)

			g.release <- struct{}{}
			if r := <-holder; r.err != nil {
				t.Fatal(r.err)
			}
			if n := tool.calls.Load(); n != 1 {
				t.Fatalf("tool ran %d times, want 1: the cancelled call must not run", n)
			}
			if _, _, err := ledger.Get(t.Context(), queued.GetRunId(), queued.GetCallId()); !errors.Is(err, action.ErrNoRecord) {
				t.Fatalf("record of the cancelled call: %v, want none", err)
			}

			// The same call id runs now.
			again := executeAsync(t.Context(), client, queued)
			<-g.entered
			g.release <- struct{}{}
			if r := <-again; r.err != nil || r.resp.GetCached() || r.resp.GetResult() != "done "+queued.GetCallId() {
				t.Fatalf("retried call: %v %v", r.resp, r.err)
			}
		})
	}
}

func TestQueueWaitCountsTowardTimeout(t *testing.T) {
	g := newGate()
	tool := queuedTool("serial", "one", g.body)
	client, reader := serveQueued(t, map[string]int{"one": 1}, tool)

	holder := executeAsync(t.Context(), client, request(t, "serial", nil))
	<-g.entered
	req := request(t, "serial", nil)
	req.TimeoutMs = 50
	resp, err := client.Execute(t.Context(), req)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_TIMEOUT || resp.GetErrorCode() != typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT ||
		resp.GetError() != "timeout" || resp.GetAttempts() != 0 {
		t.Fatalf("queued past its timeout: %v, want a timeout with no attempt", resp)
	}
	waitQueueDepth(t, reader, "one", 1)
	g.release <- struct{}{}
	<-holder
	if n := tool.calls.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
}

func TestQueueBindings(t *testing.T) {
	client, _ := serveQueued(t, map[string]int{"slow": 2}, queuedTool("slow_report", "slow", returns("")))
	resp, err := client.ListTools(t.Context(), &actionv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range resp.GetTools() {
		want := queue.Default
		if tool.GetName() == "slow_report" {
			want = "slow"
		}
		if tool.GetQueue() != want {
			t.Errorf("%s: queue %q, want %q", tool.GetName(), tool.GetQueue(), want)
		}
	}

	for _, tc := range []struct {
		opts action.Options
		want string
	}{
		{action.Options{Tools: []action.Tool{queuedTool("x", "nope", returns(""))}}, `tool "x": queue "nope" does not exist (queues: default)`},
		{action.Options{Queues: map[string]int{"one": 0}}, `queue "one": concurrency must be at least 1`},
	} {
		if _, err := action.New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New error = %v, want %q", err, tc.want)
		}
	}
}

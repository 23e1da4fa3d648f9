package server

import (
	"context"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/metricstest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestRunMetricsBucketsReachTheTimeouts: the gRPC call durations a service binary serves
// (rpc.server.call.duration, rpc.client.call.duration) have a bucket at each default timeout
// of the calls they measure, up to a run's: otelgrpc's buckets end at 10 s, below a tool call
// (30 s), a model's answer (120 s) and the public API's Run (600 s), so that every call past
// 10 s fell in +Inf and a quantile of the stages that wait on models and tools read 10 s.
func TestRunMetricsBucketsReachTheTimeouts(t *testing.T) {
	peer := New(Options{Name: "intent", Addr: "127.0.0.1:0"})
	parser{}.Register(peer.GRPC())
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	defer peer.Shutdown(t.Context())
	addr := listenOnFreeAddr(t)
	metricsAddr := freeAddr(t)
	t.Setenv("METRICS_ADDR", metricsAddr)

	exited := make(chan int, 1)
	go func() {
		exited <- run("planning", "127.0.0.1:0", false, nil,
			func(ctx context.Context, _ *config.Config) (Registrar, error) {
				conn, err := dial.New(peer.Addr())
				if err != nil {
					return nil, err
				}
				defer conn.Close()
				_, err = intentv1.NewIntentServiceClient(conn).Parse(ctx,
					&intentv1.ParseRequest{Message: "hello"})
				return parser{}, err
			})
	}()
	conn, err := dial.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	grpctest.WaitHealth(t, healthpb.NewHealthClient(conn), healthpb.HealthCheckResponse_SERVING)
	if _, err := intentv1.NewIntentServiceClient(conn).Parse(t.Context(),
		&intentv1.ParseRequest{Message: "hello"}); err != nil {
		t.Fatal(err)
	}

	d := config.Default().Defaults
	var timeouts []float64
	for _, ms := range []int64{d.ToolTimeoutMS, d.StepTimeoutMS, d.TotalTimeoutMS} {
		timeouts = append(timeouts, time.Duration(ms*int64(time.Millisecond)).Seconds())
	}
	parse := metricstest.Labels{"rpc_method": "agentmesh.intent.v1.IntentService/Parse"}
	for _, family := range []string{rpcDuration, "rpc_client_call_duration_seconds"} {
		var series []float64
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if s := metricstest.Scrape(t, metricsAddr).Series(family, parse); len(s) > 0 {
				for _, b := range s[0].GetHistogram().GetBucket() {
					series = append(series, b.GetUpperBound())
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s series of Parse", family)
			}
		}
		for _, timeout := range timeouts {
			if !slices.Contains(series, timeout) {
				t.Errorf("%s has no bucket at %v s, a default timeout of the calls it measures: %v",
					family, timeout, series)
			}
		}
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exited; code != exitcode.OK {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

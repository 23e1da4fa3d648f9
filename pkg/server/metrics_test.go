package server

import (
	"context"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/metricstest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// rpcDuration is the Prometheus name of rpc.server.call.duration.
const rpcDuration = "rpc_server_call_duration_seconds"

// TestRunServesMetrics: with METRICS_ADDR, a service binary serves Prometheus text on
// /metrics with the latency of every RPC per method and status code; RPCs of methods the
// server does not have make no series, whatever names the caller makes up.
func TestRunServesMetrics(t *testing.T) {
	addr := listenOnFreeAddr(t)
	metricsAddr := freeAddr(t)
	t.Setenv("METRICS_ADDR", metricsAddr)

	exited := make(chan int, 1)
	go func() {
		exited <- run("intent", "127.0.0.1:0", false, nil, func(context.Context, *config.Config) (Registrar, error) { return parser{}, nil })
	}()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	grpctest.WaitHealth(t, healthpb.NewHealthClient(conn), healthpb.HealthCheckResponse_SERVING)

	client := intentv1.NewIntentServiceClient(conn)
	for range 2 {
		if _, err := client.Parse(t.Context(), &intentv1.ParseRequest{Message: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.Parse(t.Context(), &intentv1.ParseRequest{Message: "unsafe"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("unsafe Parse: %v, want PERMISSION_DENIED", err)
	}
	for _, made := range []string{"/agentmesh.intent.v1.IntentService/Made1", "/made.Up/Two"} {
		if err := conn.Invoke(t.Context(), made, &emptypb.Empty{}, &emptypb.Empty{}); status.Code(err) != codes.Unimplemented {
			t.Fatalf("%s: %v, want UNIMPLEMENTED", made, err)
		}
	}

	// An RPC is measured when it ends on the server, which may be after its client has the
	// answer.
	parse := "agentmesh.intent.v1.IntentService/Parse"
	ok := metricstest.Labels{"rpc_method": parse, "rpc_response_status_code": "OK"}
	denied := metricstest.Labels{"rpc_method": parse, "rpc_response_status_code": "PERMISSION_DENIED"}
	var m metricstest.Families
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		m = metricstest.Scrape(t, metricsAddr)
		if m.Count(rpcDuration, ok) == 2 && m.Count(rpcDuration, denied) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s counts %d OK and %d PERMISSION_DENIED Parse RPCs, want 2 and 1 (families %s)",
				rpcDuration, m.Count(rpcDuration, ok), m.Count(rpcDuration, denied), m)
		}
	}
	methods := m.LabelValues(rpcDuration, "rpc_method", nil)
	for _, method := range methods {
		if method != parse && method != "grpc.health.v1.Health/Check" {
			t.Errorf("a series of the method %q, want only methods the server has: %v", method, methods)
		}
	}
	if got := m.Value("target_info", metricstest.Labels{"service_name": "agentmesh-intent"}); got != 1 {
		t.Errorf("target_info of service agentmesh-intent = %v, want 1", got)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exited; code != exitcode.OK {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if c, err := net.Dial("tcp", metricsAddr); err == nil {
		c.Close()
		t.Error("the metrics listener still accepts connections after the exit")
	}
}

// TestRunMetricsNameNoPeer: a service binary's calls to another service are measured
// (rpc.client.call.duration, per method and status code), but no series names the peer's
// address: the stats handler labelled them with the address and port the call connected to,
// in a cluster a pod's, so every pod a caller ever reached (each rollout and scaling of a
// stage) made series of its own that lived as long as the process.
func TestRunMetricsNameNoPeer(t *testing.T) {
	peer := New(Options{Name: "intent", Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	parser{}.Register(peer.GRPC())
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	defer peer.Shutdown(t.Context())
	listenOnFreeAddr(t)
	metricsAddr := freeAddr(t)
	t.Setenv("METRICS_ADDR", metricsAddr)

	called := make(chan error, 1)
	exited := make(chan int, 1)
	go func() {
		exited <- run("planning", "127.0.0.1:0", false, nil, func(ctx context.Context, _ *config.Config) (Registrar, error) {
			conn, err := dial.New(peer.Addr())
			if err != nil {
				return nil, err
			}
			defer conn.Close()
			_, err = intentv1.NewIntentServiceClient(conn).Parse(ctx, &intentv1.ParseRequest{Message: "hello"})
			called <- err
			return parser{}, nil
		})
	}()
	if err := <-called; err != nil {
		t.Fatalf("the call to the peer: %v", err)
	}
	m := metricstest.Scrape(t, metricsAddr)
	parse := metricstest.Labels{"rpc_method": "agentmesh.intent.v1.IntentService/Parse", "rpc_response_status_code": "OK"}
	if n := m.Count("rpc_client_call_duration_seconds", parse); n != 1 {
		t.Errorf("rpc_client_call_duration_seconds counts %d Parse calls, want 1 (families %s)", n, m)
	}
	for name, f := range m {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "server_address" || l.GetName() == "server_port" {
					t.Errorf("%s has a series labelled %s=%q, the peer's", name, l.GetName(), l.GetValue())
				}
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

// parser answers Parse with the message as the goal, and fails "unsafe" INTENT_UNSAFE.
type parser struct {
	intentv1.UnimplementedIntentServiceServer
}

func (p parser) Register(g grpc.ServiceRegistrar) { intentv1.RegisterIntentServiceServer(g, p) }

func (parser) Parse(_ context.Context, req *intentv1.ParseRequest) (*intentv1.ParseResponse, error) {
	if req.GetMessage() == "unsafe" {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE, "the message asks for something unsafe")
	}
	return &intentv1.ParseResponse{Goal: req.GetMessage()}, nil
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

package server

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
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

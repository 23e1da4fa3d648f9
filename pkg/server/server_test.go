package server_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const parseMethod = "/agentmesh.intent.v1.IntentService/Parse"

// intentStub answers Parse by its message: "panic" panics, "unsafe" fails INTENT_UNSAFE,
// "slow" blocks until release is closed, anything else echoes the message as the goal.
type intentStub struct {
	intentv1.UnimplementedIntentServiceServer
	slowStarted chan struct{}
	release     chan struct{}
	releaseOnce sync.Once
}

// releaseSlow lets every "slow" Parse return.
func (s *intentStub) releaseSlow() { s.releaseOnce.Do(func() { close(s.release) }) }

func newIntentStub() *intentStub {
	return &intentStub{slowStarted: make(chan struct{}, 8), release: make(chan struct{})}
}

func (s *intentStub) Register(g grpc.ServiceRegistrar) { intentv1.RegisterIntentServiceServer(g, s) }

func (s *intentStub) Parse(ctx context.Context, req *intentv1.ParseRequest) (*intentv1.ParseResponse, error) {
	switch req.GetMessage() {
	case "panic":
		panic("boom")
	case "unsafe":
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE, "the message asks for something unsafe")
	case "slow":
		s.slowStarted <- struct{}{}
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &intentv1.ParseResponse{Goal: req.GetMessage()}, nil
}

// fixture is a started server with the intent stub and a client connection to it.
type fixture struct {
	srv  *server.Server
	stub *intentStub
	conn *grpc.ClientConn
	logs *logtest.Buffer
}

func (f *fixture) intent() intentv1.IntentServiceClient {
	return intentv1.NewIntentServiceClient(f.conn)
}

func (f *fixture) health() healthpb.HealthClient { return healthpb.NewHealthClient(f.conn) }

// start serves the intent stub on a loopback port with opts (Name and Addr defaulted) and
// dials it with dialOpts. Everything stops when the test ends.
func start(t *testing.T, opts server.Options, dialOpts ...dial.Option) *fixture {
	t.Helper()
	logs := &logtest.Buffer{}
	if opts.Name == "" {
		opts.Name = "intent"
	}
	opts.Addr = "127.0.0.1:0"
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	srv := server.New(opts)
	stub := newIntentStub()
	stub.Register(srv.GRPC())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := dial.New(srv.Addr(), dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		stub.releaseSlow()
		srv.Shutdown(context.WithoutCancel(t.Context()))
	})
	return &fixture{srv: srv, stub: stub, conn: conn, logs: logs}
}

func TestHealth(t *testing.T) {
	f := start(t, server.Options{Name: "intent"})
	for _, name := range []string{"", "intent", "agentmesh.intent.v1.IntentService"} {
		resp, err := f.health().Check(t.Context(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatalf("Check(%q): %v", name, err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, want SERVING", name, resp.GetStatus())
		}
	}
	if _, err := f.health().Check(t.Context(), &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check(unknown) = %v, want NotFound", err)
	}

	watchCtx, cancelWatch := context.WithCancel(t.Context())
	defer cancelWatch()
	watch, err := f.health().Watch(watchCtx, &healthpb.HealthCheckRequest{Service: "intent"})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := watch.Recv(); err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first watch update = %v, %v; want SERVING", first, err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		f.srv.Shutdown(t.Context())
	}()
	if next, err := watch.Recv(); err != nil || next.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("watch update after Shutdown began = %v, %v; want NOT_SERVING", next, err)
	}
	cancelWatch() // the drain waits for the watch, an in-flight RPC
	<-stopped
}

func TestReflectionListsServices(t *testing.T) {
	f := start(t, server.Options{})
	stream, err := reflectionpb.NewServerReflectionClient(f.conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"agentmesh.intent.v1.IntentService", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
}

func TestPanicIsRecovered(t *testing.T) {
	f := start(t, server.Options{})
	_, err := f.intent().Parse(t.Context(), &intentv1.ParseRequest{Message: "panic"})
	if status.Code(err) != codes.Internal {
		t.Fatalf("code = %v (%v), want Internal", status.Code(err), err)
	}
	if got, want := status.Convert(err).Message(), "internal error in "+parseMethod; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	logs := f.logs.String()
	for _, want := range []string{"panic in gRPC handler", `"panic":"boom"`, parseMethod, "goroutine ", "runtime/debug.Stack"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}

	resp, err := f.intent().Parse(t.Context(), &intentv1.ParseRequest{Message: "still there?"})
	if err != nil || resp.GetGoal() != "still there?" {
		t.Fatalf("after a panic: %v, %v; want the server to keep serving", resp, err)
	}
}

func TestStageErrorsAreMapped(t *testing.T) {
	f := start(t, server.Options{})
	_, err := f.intent().Parse(t.Context(), &intentv1.ParseRequest{Message: "unsafe"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("code = %v (%v), want PermissionDenied", status.Code(err), err)
	}
	se := stageerr.FromError(err)
	if se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE || !errors.Is(se, stageerr.ErrIntentUnsafe) {
		t.Errorf("StageError code = %v, want INTENT_UNSAFE", se.Code)
	}
	if se.Msg != "the message asks for something unsafe" {
		t.Errorf("StageError message = %q", se.Msg)
	}
}

func TestGracefulDrain(t *testing.T) {
	f := start(t, server.Options{})
	type result struct {
		resp *intentv1.ParseResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := f.intent().Parse(t.Context(), &intentv1.ParseRequest{Message: "slow"})
		done <- result{resp, err}
	}()
	<-f.stub.slowStarted

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		f.srv.Shutdown(t.Context())
	}()
	waitUntilRefused(t, f.srv.Addr())
	select {
	case <-stopped:
		t.Fatal("Shutdown returned while an RPC was in flight")
	default:
	}

	f.stub.releaseSlow()
	r := <-done
	if r.err != nil || r.resp.GetGoal() != "slow" {
		t.Fatalf("in-flight RPC = %v, %v; want it to complete", r.resp, r.err)
	}
	<-stopped
}

func TestDrainTimeoutCancelsStragglers(t *testing.T) {
	f := start(t, server.Options{DrainTimeout: 50 * time.Millisecond}, dial.WithoutRetry())
	done := make(chan error, 1)
	go func() {
		_, err := f.intent().Parse(t.Context(), &intentv1.ParseRequest{Message: "slow"})
		done <- err
	}()
	<-f.stub.slowStarted
	f.srv.Shutdown(t.Context()) // returns although the RPC never finishes by itself
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Fatalf("straggler RPC = %v, want Unavailable", err)
	}
	if !strings.Contains(f.logs.String(), "drain timed out") {
		t.Errorf("log does not say the drain timed out:\n%s", f.logs.String())
	}
}

func TestServeBlocksUntilShutdown(t *testing.T) {
	srv := server.New(server.Options{Name: "intent", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := dial.New(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != lis.Addr().String() {
		t.Errorf("Addr() = %q, want %q", srv.Addr(), lis.Addr())
	}
	srv.Shutdown(t.Context())
	if err := <-served; err != nil {
		t.Errorf("Serve after Shutdown = %v, want nil", err)
	}
}

func TestClientAndServerSpansShareTheTrace(t *testing.T) {
	rec := telemetry.NewRecorder()
	f := start(t,
		server.Options{TracerProvider: rec.Provider("agentmesh-intent")},
		dial.WithTracerProvider(rec.Provider("agentmesh-orchestrator")),
	)
	if _, err := f.intent().Parse(t.Context(), &intentv1.ParseRequest{Message: "hello"}); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(5 * time.Second)
	for {
		client, server := parseSpans(rec)
		if client.IsValid() && server.IsValid() {
			if client.TraceID() != server.TraceID() {
				t.Fatalf("client trace %s, server trace %s: want one trace", client.TraceID(), server.TraceID())
			}
			got := rec.Services(client.TraceID())
			if want := []string{"agentmesh-intent", "agentmesh-orchestrator"}; !slices.Equal(got, want) {
				t.Fatalf("services in the trace = %v, want %v", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans of %s: client %v, server %v; want both", parseMethod, client, server)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHealthChecksAreNotTraced: the calls of the gRPC health service (a Kubernetes probe's
// Check every few seconds, the Watch a client's health checking holds for as long as its
// connection lives) make no span, where every other call makes its client and server spans.
// Each made a trace of its own, sampled by every stage's parent-based sampler whatever the
// orchestrator sampled (README "Tracing"), so Jaeger held a probe's trace every few seconds
// per replica and a Watch span as long as a connection.
func TestHealthChecksAreNotTraced(t *testing.T) {
	rec := telemetry.NewRecorder()
	f := start(t,
		server.Options{TracerProvider: rec.Provider("agentmesh-intent")},
		dial.WithTracerProvider(rec.Provider("agentmesh-orchestrator")),
	)
	if _, err := f.health().Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.intent().Parse(t.Context(), &intentv1.ParseRequest{Message: "hello"}); err != nil {
		t.Fatal(err)
	}
	// Closed, the connection ends its health Watch; shut down, the server has ended every
	// server span.
	_ = f.conn.Close()
	f.srv.Shutdown(context.WithoutCancel(t.Context()))
	var names []string
	for _, s := range rec.Spans() {
		names = append(names, s.SpanKind().String()+" "+s.Name())
	}
	for _, name := range names {
		if strings.Contains(name, "grpc.health.v1.Health/") {
			t.Errorf("span %q", name)
		}
	}
	if !slices.Contains(names, "server agentmesh.intent.v1.IntentService/Parse") {
		t.Errorf("spans %v: no server span of Parse", names)
	}
}

// parseSpans returns the span contexts of the ended client and server spans of Parse.
func parseSpans(rec *telemetry.Recorder) (client, server trace.SpanContext) {
	for _, s := range rec.Spans() {
		if "/"+s.Name() != parseMethod {
			continue
		}
		switch s.SpanKind() {
		case trace.SpanKindClient:
			client = s.SpanContext()
		case trace.SpanKindServer:
			server = s.SpanContext()
		}
	}
	return client, server
}

// waitUntilRefused polls until addr no longer accepts connections.
func waitUntilRefused(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return
		}
		_ = conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

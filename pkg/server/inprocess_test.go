package server_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strings"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/logtest"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/telemetry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// inProcess is the intent stub served in process, a client of it, and the logs.
type inProcess struct {
	p      *server.InProcess
	stub   *intentStub
	intent intentv1.IntentServiceClient
	logs   *logtest.Buffer
}

// startInProcess serves the intent stub in process with opts and calls it over a channel with
// dialOpts; the stub's slow calls are released when the test ends.
func startInProcess(t *testing.T, opts server.Options, dialOpts ...dial.Option) *inProcess {
	t.Helper()
	logs := &logtest.Buffer{}
	opts.Name, opts.Logger = "intent", slog.New(slog.NewJSONHandler(logs, nil))
	p, err := server.NewInProcess(opts)
	if err != nil {
		t.Fatal(err)
	}
	stub := newIntentStub()
	stub.Register(p)
	t.Cleanup(func() {
		stub.releaseSlow()
		p.Shutdown(context.WithoutCancel(t.Context()))
	})
	return &inProcess{p: p, stub: stub, intent: intentv1.NewIntentServiceClient(dial.InProcess(p.Channel(), dialOpts...)), logs: logs}
}

// TestInProcessServesAsTheServer: in process, a panic is INTERNAL and logged, a stage error
// keeps its code and details, and the client and server spans are one trace, as over gRPC.
func TestInProcessServesAsTheServer(t *testing.T) {
	rec := telemetry.NewRecorder()
	f := startInProcess(t, server.Options{TracerProvider: rec.Provider("agentmesh-intent")},
		dial.WithTracerProvider(rec.Provider("agentmesh-orchestrator")))

	_, err := f.intent.Parse(t.Context(), &intentv1.ParseRequest{Message: "panic"})
	if got, want := status.Convert(err).Message(), "internal error in "+parseMethod; status.Code(err) != codes.Internal || got != want {
		t.Errorf("panic: %v, want Internal %q", err, want)
	}
	if !strings.Contains(f.logs.String(), `"panic":"boom"`) {
		t.Errorf("the panic is not logged:\n%s", f.logs.String())
	}
	_, err = f.intent.Parse(t.Context(), &intentv1.ParseRequest{Message: "unsafe"})
	if se := stageerr.FromError(err); status.Code(err) != codes.PermissionDenied || se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE {
		t.Errorf("stage error: %v (stage code %v), want PermissionDenied INTENT_UNSAFE", err, se.Code)
	}
	if resp, err := f.intent.Parse(t.Context(), &intentv1.ParseRequest{Message: "hello"}); err != nil || resp.GetGoal() != "hello" {
		t.Fatalf("Parse = %v, %v", resp, err)
	}

	deadline := time.Now().Add(5 * time.Second)
	for {
		client, server := parseSpans(rec)
		if client.IsValid() && server.IsValid() {
			if client.TraceID() != server.TraceID() {
				t.Fatalf("client trace %s, server trace %s: want one trace", client.TraceID(), server.TraceID())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans of %s: client %v, server %v; want both", parseMethod, client, server)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestInProcessDrain: Shutdown refuses new calls with UNAVAILABLE and returns once the call in
// flight has finished, which it lets finish.
func TestInProcessDrain(t *testing.T) {
	f := startInProcess(t, server.Options{})
	done := make(chan error, 1)
	go func() {
		_, err := f.intent.Parse(t.Context(), &intentv1.ParseRequest{Message: "slow"})
		done <- err
	}()
	<-f.stub.slowStarted
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		f.p.Shutdown(t.Context())
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := f.intent.Parse(t.Context(), &intentv1.ParseRequest{Message: "late"})
		if status.Code(err) == codes.Unavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a call after Shutdown began = %v, want Unavailable", err)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-stopped:
		t.Fatal("Shutdown returned while a call was in flight")
	default:
	}
	f.stub.releaseSlow()
	if err := <-done; err != nil {
		t.Fatalf("the call in flight = %v, want it to complete", err)
	}
	<-stopped
}

// TestInProcessRefusesAuthentication: options that authenticate callers are an error.
func TestInProcessRefusesAuthentication(t *testing.T) {
	_, err := server.NewInProcess(server.Options{TLS: &tls.Config{}})
	if err == nil || !strings.Contains(err.Error(), "Options.Auth, TLS and Mesh must be unset") {
		t.Fatalf("NewInProcess with TLS = %v, want the error naming them", err)
	}
}

package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// closer is a Registrar with nothing to register that records being closed.
type closer struct{ closed atomic.Bool }

func (*closer) Register(grpc.ServiceRegistrar) {}

func (c *closer) Close() error {
	c.closed.Store(true)
	return nil
}

func TestRunExitCodes(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	ok := func(context.Context, *config.Config) (Registrar, error) { return &closer{}, nil }
	dev := newDevPKI(t)
	table := []struct {
		name  string
		env   map[string]string
		build func(context.Context, *config.Config) (Registrar, error)
		want  int
	}{
		{"build fails", nil, func(context.Context, *config.Config) (Registrar, error) { return nil, errors.New("no store") }, exitcode.Failed},
		{"build finds bad config", nil, func(context.Context, *config.Config) (Registrar, error) {
			return nil, exitcode.Wrap(exitcode.Invalid, errors.New("MEMORY_ADDR is empty"))
		}, exitcode.Invalid},
		{"address in use", map[string]string{"LISTEN_ADDR": busy.Addr().String()}, ok, exitcode.Unavailable},
		// These exited 3, as for an address in use: not a configuration error.
		{"listen address with a port out of range", map[string]string{"LISTEN_ADDR": "127.0.0.1:99999"}, ok, exitcode.Invalid},
		{"listen address without a port", map[string]string{"LISTEN_ADDR": "localhost"}, ok, exitcode.Invalid},
		{"metrics address with a port out of range", map[string]string{"METRICS_ADDR": "127.0.0.1:99999"}, ok, exitcode.Invalid},
		{"metrics address in use", map[string]string{"METRICS_ADDR": busy.Addr().String()}, ok, exitcode.Unavailable},
		{"metrics web configuration that does not load", map[string]string{"METRICS_ADDR": "127.0.0.1:0", "METRICS_WEB_CONFIG": "/nonexistent/web.yml"}, ok, exitcode.Invalid},
		{"bad tracing config", map[string]string{"OTEL_SDK_DISABLED": "", "OTEL_TRACES_EXPORTER": "zipkin"}, ok, exitcode.Invalid},
		// Accepted, and the spans went out as protobuf: the Go exporter has no JSON encoding.
		{"OTLP over HTTP with JSON", map[string]string{"OTEL_SDK_DISABLED": "", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, ok, exitcode.Invalid},
		{"bad sampler", map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, ok, exitcode.Invalid},
		{"bad sampling ratio", map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, ok, exitcode.Invalid},
		{"missing configuration file", map[string]string{"AGENTMESH_CONFIG": "/nonexistent/agentmesh.yaml"}, ok, exitcode.Invalid},
		{"message limit not a number", map[string]string{"GRPC_MAX_MESSAGE_BYTES": "32MiB"}, ok, exitcode.Invalid},
		{"message limit too small", map[string]string{"GRPC_MAX_MESSAGE_BYTES": "32"}, ok, exitcode.Invalid},
		{"drain timeout not a number", map[string]string{"DRAIN_TIMEOUT_MS": "45s"}, ok, exitcode.Invalid},
		{"no drain timeout", map[string]string{"DRAIN_TIMEOUT_MS": "0"}, ok, exitcode.Invalid},
		{"drain timeout over a day", map[string]string{"DRAIN_TIMEOUT_MS": "86400001"}, ok, exitcode.Invalid},
		{"reachable from other hosts without authentication", map[string]string{"LISTEN_ADDR": "0.0.0.0:0"}, ok, exitcode.Invalid},
		{"every interface without authentication", map[string]string{"LISTEN_ADDR": ":0"}, ok, exitcode.Invalid},
		{"mesh CA without a certificate", map[string]string{"TLS_CA": dev.ca}, ok, exitcode.Invalid},
		{"certificate without key", map[string]string{"TLS_CA": dev.ca, "TLS_CERT": dev.intent.Cert}, ok, exitcode.Invalid},
		{"certificate naming no mesh identity", map[string]string{"TLS_CA": dev.ca, "TLS_CERT": dev.user.Cert, "TLS_KEY": dev.user.Key}, ok, exitcode.Invalid},
		{"certificate of another CA", map[string]string{"TLS_CA": dev.ca, "TLS_CERT": dev.other.Cert, "TLS_KEY": dev.other.Key}, ok, exitcode.Invalid},
		{"mesh CRLs without the mesh CA", map[string]string{"TLS_CRL": dev.crl}, ok, exitcode.Invalid},
		{"mesh CRLs that do not parse", map[string]string{"TLS_CA": dev.ca, "TLS_CERT": dev.intent.Cert, "TLS_KEY": dev.intent.Key, "TLS_CRL": dev.badCRL}, ok, exitcode.Invalid},
		{"mesh CRLs of another CA", map[string]string{"TLS_CA": dev.ca, "TLS_CERT": dev.intent.Cert, "TLS_KEY": dev.intent.Key, "TLS_CRL": dev.otherCRL}, ok, exitcode.Invalid},
		{"missing mesh CRLs", map[string]string{"TLS_CA": dev.ca, "TLS_CERT": dev.intent.Cert, "TLS_KEY": dev.intent.Key, "TLS_CRL": dev.crl + ".missing"}, ok, exitcode.Invalid},
		{"memory share not a number", map[string]string{MemoryRatioEnv: "90%"}, ok, exitcode.Invalid},
		{"memory share over the limit", map[string]string{MemoryRatioEnv: "1.5"}, ok, exitcode.Invalid},
		{"no memory share", map[string]string{MemoryRatioEnv: "0"}, ok, exitcode.Invalid},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_SDK_DISABLED", "true")
			t.Setenv("OTEL_TRACES_SAMPLER", "")
			t.Setenv("OTEL_TRACES_SAMPLER_ARG", "")
			t.Setenv("LISTEN_ADDR", "")
			t.Setenv("METRICS_ADDR", "")
			t.Setenv("METRICS_WEB_CONFIG", "")
			t.Setenv("AGENTMESH_CONFIG", "")
			t.Setenv("GRPC_MAX_MESSAGE_BYTES", "")
			t.Setenv("DRAIN_TIMEOUT_MS", "")
			t.Setenv("AGENTMESH_INSECURE", "")
			t.Setenv("TLS_CA", "")
			t.Setenv("TLS_CERT", "")
			t.Setenv("TLS_KEY", "")
			t.Setenv("TLS_CRL", "")
			t.Setenv(MemoryRatioEnv, "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if got := run("intent", "127.0.0.1:0", false, nil, tc.build); got != tc.want {
				t.Errorf("run = %d, want %d", got, tc.want)
			}
		})
	}
}

// listenOnFreeAddr points LISTEN_ADDR at a free loopback address, which it returns, and turns
// tracing off and the configuration's environment variables, for run.
func listenOnFreeAddr(t *testing.T) string {
	t.Helper()
	addr := grpctest.FreeAddr(t)
	t.Setenv("OTEL_SDK_DISABLED", "true")
	t.Setenv("LISTEN_ADDR", addr)
	t.Setenv("METRICS_ADDR", "")
	t.Setenv("DRAIN_TIMEOUT_MS", "")
	t.Setenv("AGENTMESH_CONFIG", "")
	t.Setenv("GRPC_MAX_MESSAGE_BYTES", "")
	t.Setenv("TLS_CA", "")
	t.Setenv("TLS_CERT", "")
	t.Setenv("TLS_KEY", "")
	t.Setenv("TLS_CRL", "")
	return addr
}

func TestRunServesUntilSignal(t *testing.T) {
	addr := listenOnFreeAddr(t)

	svc := &closer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run("intent", "127.0.0.1:0", false, nil, func(context.Context, *config.Config) (Registrar, error) { return svc, nil })
	}()

	conn, err := dial.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitServing(t, conn, "intent", fmt.Sprintf("the service never reported SERVING on LISTEN_ADDR %s", addr))

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exited; code != exitcode.OK {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if !svc.closed.Load() {
		t.Error("the service was not closed after the drain")
	}
}

func TestRunReportsTheRegistrarsHealth(t *testing.T) {
	addr := listenOnFreeAddr(t)

	ready := make(chan struct{}) // closed when the service can serve
	health := HealthFunc(func() (bool, <-chan struct{}) {
		select {
		case <-ready:
			return true, nil
		default:
			return false, ready
		}
	})
	svc := &closer{}
	closedToo := false
	exited := make(chan int, 1)
	go func() {
		exited <- run("orchestrator", "127.0.0.1:0", false, nil, func(context.Context, *config.Config) (Registrar, error) {
			return WithClose(WithHealth(svc, health), func() error { closedToo = true; return nil }), nil
		})
	}()

	// A plain client: pkg/dial's connections check health themselves and fail while
	// NOT_SERVING.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitStatus := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
			if err == nil && resp.GetStatus() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("health never reported %v: %v, %v", want, resp, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitStatus(healthpb.HealthCheckResponse_NOT_SERVING)
	close(ready)
	waitStatus(healthpb.HealthCheckResponse_SERVING)

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exited; code != exitcode.OK {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if !svc.closed.Load() || !closedToo {
		t.Errorf("closed the service %v and the extra cleanup %v, want both", svc.closed.Load(), closedToo)
	}
}

func TestEnv(t *testing.T) {
	t.Setenv("MEMORY_ADDR", "10.0.0.7:7008")
	if got := Env("MEMORY_ADDR", "127.0.0.1:7008"); got != "10.0.0.7:7008" {
		t.Errorf("Env(set) = %q", got)
	}
	t.Setenv("MEMORY_ADDR", "")
	if got := Env("MEMORY_ADDR", "127.0.0.1:7008"); got != "127.0.0.1:7008" {
		t.Errorf("Env(empty) = %q, want the default", got)
	}
}

// TestRunTakesTheMessageLimitFromConfiguration (issue 11.6): the service gets the loaded
// configuration, GRPC_MAX_MESSAGE_BYTES overrides grpc.max_message_bytes, and the server
// refuses a larger request with RESOURCE_EXHAUSTED.
func TestRunTakesTheMessageLimitFromConfiguration(t *testing.T) {
	addr := listenOnFreeAddr(t)
	file := filepath.Join(t.TempDir(), "agentmesh.yaml")
	if err := os.WriteFile(file, []byte("grpc: {max_message_bytes: 4194304}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTMESH_CONFIG", file)
	t.Setenv("GRPC_MAX_MESSAGE_BYTES", "1048576")

	got := make(chan int, 1)
	exited := make(chan int, 1)
	go func() {
		exited <- run("intent", "127.0.0.1:0", false, nil, func(_ context.Context, cfg *config.Config) (Registrar, error) {
			got <- cfg.GRPC.MaxMessageBytes
			return &closer{}, nil
		})
	}()
	select {
	case n := <-got:
		if n != 1<<20 {
			t.Errorf("the service got grpc.max_message_bytes %d, want GRPC_MAX_MESSAGE_BYTES's 1048576", n)
		}
	case code := <-exited:
		t.Fatalf("run exited %d before building the service", code)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpctest.RawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Just over 1 MiB: what it holds does not matter, it is refused before it is decoded.
	tooLarge := protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), make([]byte, 1<<20))
	deadline := time.Now().Add(10 * time.Second)
	for {
		var reply []byte
		err := conn.Invoke(t.Context(), "/grpc.health.v1.Health/Check", &tooLarge, &reply)
		if status.Code(err) == codes.ResourceExhausted {
			break
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("a request over the limit: %v, want RESOURCE_EXHAUSTED", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exited; code != exitcode.OK {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

// devPKI is a mesh CA with the certificates the tests of run use, and files of CRLs.
type devPKI struct {
	ca                                string // the mesh CA's certificate
	intent, orchestrator, user, other certs.Pair
	crl                               string // a CRL of the mesh CA
	otherCRL                          string // a CRL of the other CA
	badCRL                            string // a file that holds no CRL
}

func newDevPKI(t *testing.T) devPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA("mesh CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	p := devPKI{ca: filepath.Join(dir, "ca.pem")}
	if err := ca.WriteCert(p.ca); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pair *certs.Pair
		ca   *certs.CA
		name string
		s    certs.Subject
	}{
		{&p.intent, ca, "intent", certs.Service("intent")},
		{&p.orchestrator, ca, "orchestrator", certs.Service("orchestrator")},
		{&p.user, ca, "alice", certs.Subject{CommonName: "alice", Client: true}},
		{&p.other, other, "other", certs.Service("intent")},
	} {
		if *c.pair, err = c.ca.Write(dir, c.name, c.s); err != nil {
			t.Fatal(err)
		}
	}
	p.crl, p.otherCRL, p.badCRL = filepath.Join(dir, "mesh.crl"), filepath.Join(dir, "other.crl"), filepath.Join(dir, "bad.crl")
	for file, c := range map[string]*certs.CA{p.crl: ca, p.otherCRL: other, p.badCRL: nil} {
		data := []byte("not a CRL")
		if c != nil {
			if data, err = c.RevocationList(certs.CRL{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestRunServesMutualTLSBetweenServices (issue 12.3): with TLS_CA, TLS_CERT and TLS_KEY a
// stage binary serves mutual TLS, so it may listen on every interface without --insecure;
// a mesh identity checks its health, a plaintext client cannot.
func TestRunServesMutualTLSBetweenServices(t *testing.T) {
	addr := listenOnFreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	t.Setenv("LISTEN_ADDR", "0.0.0.0:"+port)
	t.Setenv("AGENTMESH_INSECURE", "")
	dev := newDevPKI(t)
	t.Setenv("TLS_CA", dev.ca)
	t.Setenv("TLS_CERT", dev.intent.Cert)
	t.Setenv("TLS_KEY", dev.intent.Key)

	exited := make(chan int, 1)
	go func() {
		exited <- run("intent", "127.0.0.1:0", false, nil, func(_ context.Context, cfg *config.Config) (Registrar, error) {
			if cfg.TLS.CA != dev.ca || cfg.TLS.Cert != dev.intent.Cert {
				t.Errorf("the service got tls %+v, want the environment's", cfg.TLS)
			}
			return &closer{}, nil
		})
	}()
	orchestrator, err := config.TLS{CA: dev.ca, Cert: dev.orchestrator.Cert, Key: dev.orchestrator.Key}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := dial.New(addr, dial.WithMesh(orchestrator))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitServing(t, conn, "", "the service never reported SERVING over mutual TLS")
	plain, err := dial.New(addr, dial.WithoutRetry())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := healthpb.NewHealthClient(plain).Check(t.Context(), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Errorf("a plaintext health check: %v, want UNAVAILABLE", err)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exited; code != exitcode.OK {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

// TestRunRefusesArgumentsItDoesNotTake: a service binary takes health, --insecure and --help;
// it served whatever else it was given, so that `planning --help` started the planning service
// and a healthcheck's mistyped `health` a second server.
func TestRunRefusesArgumentsItDoesNotTake(t *testing.T) {
	listenOnFreeAddr(t)
	t.Setenv("AGENTMESH_INSECURE", "")
	ok := func(context.Context, *config.Config) (Registrar, error) { return &closer{}, nil }
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--help"}, exitcode.OK},
		{[]string{"-h"}, exitcode.OK},
		{[]string{"helth"}, exitcode.Invalid},
		{[]string{"health", "--verbose"}, exitcode.Invalid},
		{[]string{"--listen", "127.0.0.1:7002"}, exitcode.Invalid},
	} {
		exited := make(chan int, 1)
		go func() { exited <- run("planning", "127.0.0.1:0", false, tc.args, ok) }()
		select {
		case got := <-exited:
			if got != tc.want {
				t.Errorf("planning %q: exit %d, want %d", tc.args, got, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("planning %q serves instead of exiting %d", tc.args, tc.want)
		}
	}
}

// holder is a Registrar whose one method, /test.Holder/Hold, holds every call until the
// server cancels it.
type holder struct{ started chan struct{} }

func (h holder) Register(g grpc.ServiceRegistrar) {
	g.RegisterService(&grpc.ServiceDesc{ServiceName: "test.Holder", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{
		MethodName: "Hold",
		Handler: func(_ any, ctx context.Context, _ func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			close(h.started)
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}}}, h)
}

// TestRunDrainsForTheTimeoutItIsGiven: stopping, run cuts a call that never ends off at the
// end of the drain DRAIN_TIMEOUT_MS sets, over the service's own (WithDrainTimeout), and at
// the end of the service's own without it, not after DefaultDrainTimeout.
func TestRunDrainsForTheTimeoutItIsGiven(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		own       time.Duration
	}{
		{"DRAIN_TIMEOUT_MS over the service's own", "100", time.Hour},
		{"the service's own", "", 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := listenOnFreeAddr(t)
			t.Setenv("DRAIN_TIMEOUT_MS", tc.env)
			h := holder{started: make(chan struct{})}
			exited := make(chan int, 1)
			go func() {
				exited <- run("action", "127.0.0.1:0", false, nil, func(context.Context, *config.Config) (Registrar, error) {
					return WithDrainTimeout(h, tc.own), nil
				})
			}()
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.ForceCodecV2(grpctest.RawCodec{})))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			held := make(chan error, 1)
			go func() {
				var req, reply []byte
				held <- conn.Invoke(t.Context(), "/test.Holder/Hold", &req, &reply, grpc.WaitForReady(true))
			}()
			select {
			case <-h.started:
			case err := <-held:
				t.Fatalf("the held call ended before it was held: %v", err)
			}
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			timer := time.NewTimer(DefaultDrainTimeout)
			defer timer.Stop()
			select {
			case code := <-exited:
				if code != exitcode.OK {
					t.Errorf("exit code = %d, want 0", code)
				}
			case <-timer.C:
				t.Fatalf("run still drains a call that never ends %s after SIGTERM", DefaultDrainTimeout)
			}
			if err := <-held; status.Code(err) != codes.Unavailable {
				t.Errorf("the call cut off by the drain's end: %v, want UNAVAILABLE", err)
			}
		})
	}
}

// failing is a Registrar that fails for good once its failure is sent (a Failer).
type failing struct {
	closer
	failed chan error
}

func (f *failing) Failed() <-chan error { return f.failed }

// A service that fails for good while it serves (Failer: the memory stage whose index cannot
// be built) stops the server, is closed, and the process exits with the failure's code, 3
// (unavailable) unless it carries one. It served on, NOT_SERVING, for ever.
func TestRunExitsWhenTheServiceFails(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"no code", errors.New("the unique index cannot be built"), exitcode.Unavailable},
		{"its own code", exitcode.Wrap(exitcode.Invalid, errors.New("bad")), exitcode.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := listenOnFreeAddr(t)
			svc := &failing{failed: make(chan error, 1)}
			exited := make(chan int, 1)
			go func() {
				exited <- run("memory", "127.0.0.1:0", false, nil,
					func(context.Context, *config.Config) (Registrar, error) {
						return WithDrainTimeout(svc, time.Second), nil
					})
			}()
			conn, err := dial.New(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			waitServing(t, conn, "", fmt.Sprintf("the service never served on %s", addr))
			svc.failed <- tc.err
			select {
			case code := <-exited:
				if code != tc.want {
					t.Errorf("exit code = %d, want %d", code, tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("still serving 30s after the service failed")
			}
			if !svc.closed.Load() {
				t.Error("the service was not closed")
			}
		})
	}
}

// waitServing polls the health of service ("" for the server's) over conn until it is SERVING,
// failing the test with why after 10 s.
func waitServing(t *testing.T, conn grpc.ClientConnInterface, service, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(t.Context(),
			&healthpb.HealthCheckRequest{Service: service})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", why, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

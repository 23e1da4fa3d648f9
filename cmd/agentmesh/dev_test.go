package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/metricstest"
	"github.com/agentmesh/agentmesh/pkg/server"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// anyPort is the address of every listener of a test's mesh: the port each one listens on is
// the system's choice, where the orchestrator finds it and which dev's banner names
// (announced). A port picked free before the mesh starts can be taken by the time the mesh
// listens on it: TestDevServesMetrics failed so in CI ("address already in use").
const anyPort = "127.0.0.1:0"

// announced waits until dev's banner in out, what dev writes on its standard error, names
// the address it serves name on ("orchestrator", "metrics"), and returns it.
func announced(t *testing.T, out *meshproc.LogBuffer, name string) string {
	t.Helper()
	line := regexp.MustCompile(`(?m)^  ` + name + ` +(?:http://)?([0-9.]+:[0-9]+)`)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if m := line.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev did not announce its %s address:\n%s", name, out.String())
		}
	}
}

// TestDevResumesPausedRuns stops `agentmesh dev` while a run waits for approval and starts it
// again on the same data directory: the new process adopts the run, and an approval given to
// it finishes the run.
func TestDevResumesPausedRuns(t *testing.T) {
	isolate(t)
	names := []string{"orchestrator", "intent", "planning", "context", "generation", "action", "observation", "memory", "recovery"}
	var yaml strings.Builder
	yaml.WriteString("tools: {require_approval: [calculator]}\nservices:\n")
	for _, n := range names {
		fmt.Fprintf(&yaml, "  %s: %q\n", n, anyPort)
	}
	if err := os.WriteFile("agentmesh.yaml", []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	// dev starts the mesh on data and returns the orchestrator's address, which the restarted
	// mesh need not have again.
	dev := func() (addr string, stop func()) {
		ctx, cancel := context.WithCancel(t.Context())
		var logs meshproc.LogBuffer
		exited := make(chan int, 1)
		go func() { exited <- run(ctx, []string{"dev", "--data", data}, &bytes.Buffer{}, &logs) }()
		addr = announced(t, &logs, "orchestrator")
		grpctest.WaitHealth(t, grpctest.HealthClient(t, addr), healthpb.HealthCheckResponse_SERVING)
		return addr, func() {
			cancel()
			if code := <-exited; code != 0 {
				t.Errorf("dev exited %d\n%s", code, logs.String())
			}
		}
	}

	addr, stop := dev()
	code, out, errOut := cli("run", "--addr", addr, "What is 6 times 7?")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	m := regexp.MustCompile(`run (\S+) is waiting for approval of call (\S+) \(calculator\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the run did not pause:\n%s", out)
	}
	stop()

	addr, stop = dev()
	defer stop()
	if code, out, errOut := cli("approve", "--addr", addr, m[1], m[2]); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("approve after the restart: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := cli("watch", "--addr", addr, m[1]); code != 0 || !strings.Contains(errOut, "← calculator: 42") || !strings.Contains(errOut, "⟳ resumed on ") {
		t.Fatalf("watch: exit %d\n%s", code, errOut)
	}
	if code, out, _ := cli("get", "--addr", addr, m[1]); code != 0 || !strings.Contains(out, "OUTCOME_COMPLETED_WITH_TOOLS") || !strings.Contains(out, "RUN_STATE_RESUMED") {
		t.Errorf("get: exit %d\n%s", code, out)
	}
}

// TestDevServesMetrics: `agentmesh dev --metrics-addr` serves the Prometheus metrics of every
// service of the mesh, among them the RPCs each one served.
func TestDevServesMetrics(t *testing.T) {
	isolate(t)
	var yaml strings.Builder
	yaml.WriteString("services:\n")
	for _, n := range []string{"orchestrator", "intent", "planning", "context", "generation", "action", "observation", "memory", "recovery"} {
		fmt.Fprintf(&yaml, "  %s: %q\n", n, anyPort)
	}
	if err := os.WriteFile("agentmesh.yaml", []byte(yaml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var logs meshproc.LogBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"dev", "--data", t.TempDir(), "--metrics-addr", anyPort}, &bytes.Buffer{}, &logs)
	}()
	defer func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("dev exited %d\n%s", code, logs.String())
		}
	}()
	orchestrator, metrics := announced(t, &logs, "orchestrator"), announced(t, &logs, "metrics")
	grpctest.WaitHealth(t, grpctest.HealthClient(t, orchestrator), healthpb.HealthCheckResponse_SERVING)
	check := metricstest.Labels{"rpc_method": "grpc.health.v1.Health/Check", "rpc_response_status_code": "OK"}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		m := metricstest.Scrape(t, metrics)
		if m.Count("rpc_server_call_duration_seconds", check) > 0 && m.Value("target_info", metricstest.Labels{"service_name": "agentmesh"}) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no health check measured on %s (families %s)", metrics, m)
		}
	}
}

// TestDevRejectsBadMetricsWebConfig: `agentmesh dev --metrics-web-config` with a file that does
// not load stops with exit 4 naming the file, before the mesh serves.
func TestDevRejectsBadMetricsWebConfig(t *testing.T) {
	isolate(t)
	absent := filepath.Join(t.TempDir(), "web.yml")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"dev", "--metrics-addr", "127.0.0.1:0", "--metrics-web-config", absent, "--run", "What is 6 times 7?"}, &stdout, &stderr); code != 4 {
		t.Fatalf("exit %d, want 4\nstderr: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "metrics web configuration") || !strings.Contains(stderr.String(), absent) {
		t.Errorf("stderr does not name the web configuration:\n%s", stderr.String())
	}
}

// TestDevMetricsAddressInUse: `agentmesh dev --metrics-addr` on an address another listener
// holds stops with exit 3 (unavailable: retrying later may work) naming the address.
func TestDevMetricsAddressInUse(t *testing.T) {
	isolate(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"dev", "--metrics-addr", busy.Addr().String(), "--run", "What is 6 times 7?"}, &stdout, &stderr); code != 3 {
		t.Fatalf("exit %d, want 3\nstderr: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), busy.Addr().String()) {
		t.Errorf("stderr does not name the address:\n%s", stderr.String())
	}
}

// TestDevServiceAddressInUse: `agentmesh dev` whose configured address of a service another
// listener holds (macOS's AirPlay receiver holds 7000, the orchestrator's default) stops with
// exit 3, naming the address and the key that moves the service; it named only the address,
// and a newcomer had to find services.* in the code. `dev --run` is not held up by it.
func TestDevServiceAddressInUse(t *testing.T) {
	for _, service := range []string{"orchestrator", "action"} {
		t.Run(service, func(t *testing.T) {
			isolate(t)
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			var yaml strings.Builder
			yaml.WriteString("services:\n")
			for _, n := range []string{"orchestrator", "intent", "planning", "context",
				"generation", "action", "observation", "memory", "recovery"} {
				addr := anyPort
				if n == service {
					addr = busy.Addr().String()
				}
				fmt.Fprintf(&yaml, "  %s: %q\n", n, addr)
			}
			if err := os.WriteFile("agentmesh.yaml", []byte(yaml.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), []string{"dev", "--data", t.TempDir()}, &stdout, &stderr)
			if code != 3 {
				t.Fatalf("exit %d, want 3\nstderr: %s", code, stderr.String())
			}
			want := fmt.Sprintf("%q: listen tcp %[1]s: bind: address already in use; "+
				"set services.%s in agentmesh.yaml to a free host:port",
				busy.Addr().String(), service)
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
			}
			// --run listens on free ports, whatever services.* say, beside a running dev.
			stdout.Reset()
			stderr.Reset()
			code = run(t.Context(), []string{"dev", "--run", "What is 6 times 7?"},
				&stdout, &stderr)
			if code != 0 {
				t.Errorf("dev --run: exit %d, want 0\nstderr: %s", code, stderr.String())
			}
		})
	}
}

// TestDevRejectsBadSampler: `agentmesh dev` samples as OTEL_TRACES_SAMPLER says, so a value it
// cannot honour stops it with exit 4 naming the variable, before any service starts.
func TestDevRejectsBadSampler(t *testing.T) {
	isolate(t)
	t.Setenv("OTEL_TRACES_SAMPLER", "sometimes")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"dev", "--run", "What is 6 times 7?"}, &stdout, &stderr); code != 4 {
		t.Fatalf("exit %d, want 4\nstderr: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), `OTEL_TRACES_SAMPLER="sometimes" is not supported`) {
		t.Errorf("stderr does not name the variable:\n%s", stderr.String())
	}
}

// TestDevHelpNamesTheDataDirectory: `dev --help` names the directory the embedded NATS keeps
// its data in without --data, as the README does; it named its parent, where a user looking
// for the runs (or clearing them) found the agentmesh directory and not the nats one in it.
func TestDevHelpNamesTheDataDirectory(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	dir, err := devDataDir("")
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"dev", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("dev --help: exit %d\n%s", code, stderr.String())
	}
	rel := strings.TrimPrefix(dir, state)
	for _, want := range []string{"$XDG_STATE_HOME" + rel + ",", "~/.local/state" + rel + ";"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("dev --help does not name the data directory %q:\n%s", want, stdout.String())
		}
	}
}

// TestDevFlushesSpansInTime: stopping, `agentmesh dev` flushes its spans for up to
// server.FlushTimeout, as every service binary does, however the collector behaves. Before,
// it waited for each service's export as long as the exporter's own timeouts let it: with a
// collector that accepts connections and never answers, `dev --run` took more than twice that
// to exit after the run had answered.
func TestDevFlushesSpansInTime(t *testing.T) {
	isolate(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	go func() { // accept, and never answer, until the test ends
		var held []net.Conn
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range held {
					_ = c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+silent.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(t.Context(), []string{"dev", "--run", "What is 6 times 7?"}, &stdout, &stderr)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr.String())
	}
	// The run itself takes well under a second; the rest is the flush.
	if limit := server.FlushTimeout + 5*time.Second; took > limit {
		t.Errorf("dev --run took %s to exit with an unresponsive collector, want at most %s (the span flush is bounded by %s)", took, limit, server.FlushTimeout)
	}
}

// TestDevReadsAGENTMESH_CONFIG: `agentmesh dev` without --config loads the file
// $AGENTMESH_CONFIG names, as every service binary does and as the other commands take their
// addresses from it (ingest, conformance): it ignored the variable, so `agentmesh ingest` with
// it set called a memory stage other than the one dev served. --config still comes first.
func TestDevReadsAGENTMESH_CONFIG(t *testing.T) {
	isolate(t)
	bad := filepath.Join(t.TempDir(), "env.yaml")
	if err := os.WriteFile(bad, []byte("defaults:\n  max_turns: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTMESH_CONFIG", bad)
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"dev", "--run", "What is 6 times 7?"}, &stdout, &stderr); code != 4 ||
		!strings.Contains(stderr.String(), "defaults.max_turns") {
		t.Errorf("dev with $AGENTMESH_CONFIG of an invalid file: exit %d, want 4 naming its key\n%s",
			code, stderr.String())
	}
	good := filepath.Join(t.TempDir(), "flag.yaml")
	if err := os.WriteFile(good, []byte("defaults:\n  max_turns: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(t.Context(), []string{"dev", "--config", good, "--run", "What is 6 times 7?"}, &stdout, &stderr); code != 0 {
		t.Errorf("dev --config over $AGENTMESH_CONFIG: exit %d, want 0\n%s", code, stderr.String())
	}
}

// TestDevRefusesAPIKeysInClearTextBeyondLoopback: `agentmesh dev` whose public API takes
// auth.api_keys without TLS on an address other hosts can reach stops with exit 4 naming
// auth.api_keys and auth.allow_plaintext_keys, before it serves: it served, and the keys
// crossed the network in clear text.
func TestDevRefusesAPIKeysInClearTextBeyondLoopback(t *testing.T) {
	isolate(t)
	cfg := filepath.Join(t.TempDir(), "agentmesh.yaml")
	yaml := `auth:
  api_keys:
    - {hash: "sha256:785425b6b91c591fa749c00b770e9b88ff4c4e68f59bb5fd768d14bc683c4b7a", user: a}
services:
  orchestrator: "0.0.0.0:0"
  intent: "127.0.0.1:0"
  planning: "127.0.0.1:0"
  context: "127.0.0.1:0"
  generation: "127.0.0.1:0"
  action: "127.0.0.1:0"
  observation: "127.0.0.1:0"
  memory: "127.0.0.1:0"
  recovery: "127.0.0.1:0"
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// Bounds a mesh that serves (the refusal is missing) so that the test fails, not hangs.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"dev", "--config", cfg, "--data", t.TempDir()}, &stdout, &stderr)
	if code != 4 || !strings.Contains(stderr.String(), "auth.api_keys") ||
		!strings.Contains(stderr.String(), "auth.allow_plaintext_keys") {
		t.Errorf("exit %d, want 4 naming auth.api_keys and auth.allow_plaintext_keys\n%s",
			code, stderr.String())
	}
}

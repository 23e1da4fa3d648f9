package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/server"
)

func TestMain(m *testing.M) { meshproc.Main(m) }

// isolate keeps the developer's own configuration layers out of a test.
func isolate(t *testing.T) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("AGENTMESH_CONFIG", "")
	t.Chdir(t.TempDir())
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
}

// TestDevRun is the README's first command: the whole mesh on the embedded defaults and one
// real run through the public API.
func TestDevRun(t *testing.T) {
	isolate(t)
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"dev", "--run", "What is 6 times 7?"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "42") {
		t.Errorf("answer %q does not contain 42", stdout.String())
	}
	for _, want := range []string{"orchestrator", "generation", "nats", "→ calculator", "← calculator: 42", "COMPLETED_WITH_TOOLS"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress output lacks %q:\n%s", want, stderr.String())
		}
	}
	// No exporter is configured, so no span is recorded, but the run still has a trace.
	m := regexp.MustCompile(`— trace ([0-9a-f]{32})\n`).FindStringSubmatch(stderr.String())
	if m == nil || m[1] == strings.Repeat("0", 32) {
		t.Errorf("the run has no trace id:\n%s", stderr.String())
	}
}

// TestDeployConfiguration: the configuration docker-compose mounts is valid and runs.
func TestDeployConfiguration(t *testing.T) {
	cfg, err := filepath.Abs(filepath.Join("..", "..", "deploy", "agentmesh.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	isolate(t)
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"dev", "--config", cfg, "--run", "What is 6 times 7?"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "42") {
		t.Errorf("answer %q", stdout.String())
	}
}

func TestExitCodes(t *testing.T) {
	isolate(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("targets: [{provider: nope, model: x}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ghost := filepath.Join(t.TempDir(), "ghost.yaml")
	if err := os.WriteFile(ghost, []byte("mcp_servers:\n  ghost:\n    command: agentmesh-no-such-mcp-server\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badPort := filepath.Join(t.TempDir(), "port.yaml")
	if err := os.WriteFile(badPort, []byte("services:\n  orchestrator: 127.0.0.1:70000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noKey := filepath.Join(t.TempDir(), "nokey.yaml")
	if err := os.WriteFile(noKey, []byte("approvals:\n  signing_key: "+filepath.Join(t.TempDir(), "grant.key")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(t.TempDir(), "store.yaml")
	if err := os.WriteFile(storeDir, []byte("nats:\n  store_dir: "+t.TempDir()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badDSN := filepath.Join(t.TempDir(), "dsn.yaml")
	if err := os.WriteFile(badDSN, []byte("memory:\n  store: postgres\n  dsn: 'postgres://%zz'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	controlKey := filepath.Join(t.TempDir(), "key.yaml")
	keyYAML := "auth:\n  api_keys:\n    - {hash: \"sha256:" + strings.Repeat("ab", 32) + "\", user: \"al\\u009bice\"}\n"
	if err := os.WriteFile(controlKey, []byte(keyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want int
		says string
	}{
		{"no command", nil, 4, "usage"},
		{"unknown command", []string{"fly"}, 4, `unknown command "fly"`},
		{"run without message", []string{"run"}, 4, "run takes one message"},
		{"bad flag", []string{"run", "--bogus", "x"}, 4, "bogus"},
		// These were dropped (-1, 0) or wrapped to 1 turn (2^32+1) without a word.
		{"max turns below 1", []string{"run", "--addr", "127.0.0.1:1", "--max-turns", "-1", "hello"}, 4, "--max-turns: must be between 1 and 2147483647, got -1"},
		{"max turns of 0", []string{"run", "--addr", "127.0.0.1:1", "--max-turns=0", "hello"}, 4, "--max-turns: must be between 1"},
		{"max turns over int32", []string{"run", "--addr", "127.0.0.1:1", "--max-turns", "4294967297", "hello"}, 4, "--max-turns: must be between 1"},
		{"orchestrator unreachable", []string{"run", "--addr", "127.0.0.1:1", "hello"}, 3, "cannot reach the orchestrator"},
		{"invalid configuration", []string{"dev", "--config", bad, "--run", "hi"}, 4, "nope"},
		{"a port out of range", []string{"dev", "--config", badPort, "--run", "hi"}, 4, "services.orchestrator"},
		// It exited 3, as if a service could not be reached.
		{"a signing key that cannot be read", []string{"dev", "--config", noKey, "--run", "hi"}, 4, "approvals.signing_key"},
		// It exited 3, as if the database could not be reached: no wait makes it parse.
		{"a postgres DSN that cannot be parsed", []string{"dev", "--config", badDSN, "--run", "hi"}, 4, "memory.dsn: "},
		// Its principal's runs took a user id no request may name.
		{"an API key's user of a control character", []string{"dev", "--config", controlKey, "--run", "hi"}, 4,
			"auth.api_keys[0]: user and tenant must not contain a control character"},
		{"a client certificate's user of a control character",
			[]string{"certs", "--dir", t.TempDir(), "--user", "al\u0085ice"}, 4, "control character"},
		// It exited 1, as a failed run does.
		{"a data directory that cannot be made", []string{"dev", "--data", filepath.Join(notADir, "nats")}, 4, "--data"},
		// --run keeps its runs in a temporary store: the directory named was ignored.
		{"a data directory with --run", []string{"dev", "--run", "hi", "--data", t.TempDir()}, 4,
			"--data does not go with --run"},
		// The configured NATS keeps the runs: the directory named was ignored.
		{"a data directory with nats.store_dir",
			[]string{"dev", "--config", storeDir, "--data", t.TempDir()}, 4,
			"--data does not go with nats.url or nats.store_dir"},
		{"missing configuration", []string{"dev", "--config", filepath.Join(t.TempDir(), "none.yaml")}, 4, "none.yaml"},
		{"empty input fails the run", []string{"dev", "--run", "   "}, 1, "EMPTY_INPUT"},
		{"an MCP server that cannot start", []string{"dev", "--config", ghost, "--run", "hi"}, 3, `MCP server "ghost"`},
		// An empty --modify (an unset shell variable) approved the call as the model made it.
		{"an empty --modify", []string{"approve", "--addr", "127.0.0.1:1", "--modify", "", "run-1", "call-1"}, 4,
			"--modify is not a JSON object"},
		{"an empty --modify with --reject", []string{"approve", "--addr", "127.0.0.1:1", "--reject", "--modify=", "run-1", "call-1"}, 4,
			"not both"},
		// It said "open ...: no such file or directory", naming no flag.
		{"transcript verify of a missing file", []string{"transcript", "verify", "--file", filepath.Join(notADir, "r.json")}, 4,
			"--file: open "},
		{"transcript verify needs a source", []string{"transcript", "verify"}, 4, "run id or --file"},
		// It listed every tool, as if the name asked for one had been read.
		{"tools takes no arguments", []string{"tools", "--addr", "127.0.0.1:1", "calculator"}, 4, `tools takes no arguments (got ["calculator"])`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(t.Context(), tc.args, &stdout, &stderr); got != tc.want {
				t.Fatalf("exit %d, want %d\nstderr: %s", got, tc.want, stderr.String())
			}
			if !strings.Contains(stdout.String()+stderr.String(), tc.says) {
				t.Errorf("output lacks %q:\n%s%s", tc.says, stdout.String(), stderr.String())
			}
		})
	}
}

// TestHelpAndVersion (issue 11.8): every command's --help prints its flags on stdout and exits
// 0, a command of subcommands (keys, transcript) too; --version prints the build's version.
func TestHelpAndVersion(t *testing.T) {
	for _, cmd := range []string{"dev", "run", "tools", "get", "watch", "approve", "answer", "cancel", "ingest", "memories",
		"certs", "conformance", "keys", "keys new", "transcript", "transcript verify"} {
		var stdout, stderr bytes.Buffer
		args := append(strings.Fields(cmd), "--help")
		if code := run(t.Context(), args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage of agentmesh "+cmd) {
			t.Errorf("%s --help: exit %d\nstdout: %s\nstderr: %s", cmd, code, stdout.String(), stderr.String())
		}
	}
	var stdout bytes.Buffer
	if code := run(t.Context(), []string{"--version"}, &stdout, &bytes.Buffer{}); code != 0 || !strings.HasPrefix(stdout.String(), "agentmesh ") {
		t.Errorf("--version: exit %d, %q", code, stdout.String())
	}
}

// TestStageDownExits3 (issue 11.8): a run that ends because a stage cannot be reached exits 3,
// like a service that cannot be reached, not 1. (A step of a second makes the run wait for the
// intent stage orchestrator.StageWait, not the default step's two minutes.)
func TestStageDownExits3(t *testing.T) {
	isolate(t)
	cfg := config.Default()
	cfg.Defaults.StepTimeoutMS = 1000
	m, err := mesh.Start(t.Context(), mesh.Options{Config: cfg, Ephemeral: true, StoreDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	if err := m.Stop(t.Context(), mesh.Intent); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"run", "--addr", m.Addr(mesh.Orchestrator), "What is 6 times 7?"}, &stdout, &stderr); code != 3 ||
		!strings.Contains(stderr.String(), "STAGE_UNAVAILABLE") {
		t.Fatalf("exit %d, want 3\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestBrokenStageExits1: a run that ends because a stage answered but cannot serve the call
// (a replacement intent stage lacking Parse: UNIMPLEMENTED) exits 1, STAGE_CONTRACT_VIOLATION,
// not 3: the stage was reached, and running the request again cannot help.
func TestBrokenStageExits1(t *testing.T) {
	isolate(t)
	srv := server.New(server.Options{Name: mesh.Intent, Addr: "127.0.0.1:0"})
	intentv1.RegisterIntentServiceServer(srv.GRPC(), intentv1.UnimplementedIntentServiceServer{})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	m, err := mesh.Start(t.Context(), mesh.Options{Ephemeral: true, StoreDir: t.TempDir(),
		Logger:     slog.New(slog.DiscardHandler),
		StageAddrs: map[string]string{mesh.Intent: srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	var stdout, stderr bytes.Buffer
	args := []string{"run", "--addr", m.Addr(mesh.Orchestrator), "What is 6 times 7?"}
	code := run(t.Context(), args, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "STAGE_CONTRACT_VIOLATION") {
		t.Fatalf("exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
	}
}

// TestClientCertificateNeedsTheCA: a client certificate goes over TLS, which AGENTMESH_CA turns
// on; without it AGENTMESH_CERT and AGENTMESH_KEY were ignored, the CLI spoke plaintext without
// them, and left user_id to a server that did not know who called.
func TestClientCertificateNeedsTheCA(t *testing.T) {
	isolate(t)
	t.Setenv(envAPIKey, "")
	t.Setenv(envCA, "")
	for _, env := range []string{envCert, envKey} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(envCert, "")
			t.Setenv(envKey, "")
			t.Setenv(env, filepath.Join(t.TempDir(), "cli.pem"))
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), []string{"tools", "--addr", "127.0.0.1:1"}, &stdout, &stderr); code != 4 ||
				!strings.Contains(stderr.String(), "AGENTMESH_CA") {
				t.Errorf("%s without %s: exit %d, want 4 naming %s\n%s", env, envCA, code, envCA, stderr.String())
			}
		})
	}
}

// TestAMalformedAddressExits4: an --addr that is not host:port with a port from 0 to 65535 is
// an invalid argument (seed 000: exit 4), the same for every command that takes one, and the
// error names it. The CLI dialled it anyway and exited 3, as if a service could not be reached.
func TestAMalformedAddressExits4(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	for _, addr := range []string{"bad addr::", "127.0.0.1", "127.0.0.1:70000"} {
		for _, args := range [][]string{
			{"run", "hello"},
			{"tools"},
			{"get", "run-1"},
			{"watch", "run-1"},
			{"cancel", "run-1"},
			{"answer", "run-1", "yes"},
			{"approve", "run-1", "call-1"},
			{"transcript", "verify", "run-1"},
			{"memories", "list"},
			{"ingest", dir},
			{"conformance", "--stage", "planning"},
		} {
			var stdout, stderr bytes.Buffer
			args = append(args, "--addr", addr)
			if got := run(t.Context(), args, &stdout, &stderr); got != 4 || !strings.Contains(stderr.String(), `"`+addr+`"`) {
				t.Errorf("agentmesh %s: exit %d, want 4 naming the address\nstdout: %s\nstderr: %s",
					strings.Join(args, " "), got, stdout.String(), stderr.String())
			}
		}
	}
}

// TestAMalformedAddrVariableIsNamed: an address that came from $AGENTMESH_ADDR, not from
// --addr, is named by the variable too: the error quoted a value the command line did not
// have.
func TestAMalformedAddrVariableIsNamed(t *testing.T) {
	isolate(t)
	t.Setenv("AGENTMESH_ADDR", "127.0.0.1:70000")
	for _, args := range [][]string{{"run", "hello"}, {"tools"}, {"memories", "list"}} {
		var stdout, stderr bytes.Buffer
		got := run(t.Context(), args, &stdout, &stderr)
		if got != 4 || !strings.Contains(stderr.String(), `$AGENTMESH_ADDR: address "127.0.0.1:70000"`) {
			t.Errorf("agentmesh %s with a bad $AGENTMESH_ADDR: exit %d, want 4 naming the variable"+
				"\nstderr: %s", strings.Join(args, " "), got, stderr.String())
		}
	}
}

package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// keysConfig points AGENTMESH_CONFIG at a configuration with an API key and extra, and returns
// it loaded.
func keysConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentmesh.yaml")
	yaml := "auth:\n  api_keys:\n    - {hash: \"sha256:785425b6b91c591fa749c00b770e9b88ff4c4e68" +
		"f59bb5fd768d14bc683c4b7a\", user: alice}\n" + extra
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTMESH_CONFIG", path)
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPublicAPIRefusesAPIKeysInClearTextBeyondLoopback: the public API with auth.api_keys and
// without TLS refuses to start (exit 4, naming auth.api_keys and auth.allow_plaintext_keys)
// on an address other hosts can reach, where anyone on the path would read the keys, --insecure
// or not; auth.allow_plaintext_keys (TLS terminated by a proxy in front) starts it. It started
// with a warning in the log.
func TestPublicAPIRefusesAPIKeysInClearTextBeyondLoopback(t *testing.T) {
	listenOnFreeAddr(t)
	t.Setenv("AGENTMESH_INSECURE", "")
	cfg := keysConfig(t, "")
	ok := func(context.Context, *config.Config) (Registrar, error) { return &closer{}, nil }
	for _, tc := range []struct{ addr, insecure string }{
		{"0.0.0.0:0", ""}, {":0", ""}, {"0.0.0.0:0", "1"},
	} {
		t.Setenv("LISTEN_ADDR", tc.addr)
		t.Setenv("AGENTMESH_INSECURE", tc.insecure)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		err := secure(&Options{Addr: tc.addr}, true, cfg, log)
		if err == nil { // run would serve until a signal
			t.Fatalf("secure on %s, AGENTMESH_INSECURE %q: no error", tc.addr, tc.insecure)
		}
		if exitcode.Of(err) != exitcode.Invalid || !strings.Contains(err.Error(), "auth.api_keys") ||
			!strings.Contains(err.Error(), "auth.allow_plaintext_keys") {
			t.Errorf("secure on %s = %v; want exit 4 naming auth.api_keys and "+
				"auth.allow_plaintext_keys", tc.addr, err)
		}
		if code := run("orchestrator", "127.0.0.1:0", true, nil, ok); code != exitcode.Invalid {
			t.Errorf("LISTEN_ADDR %s, AGENTMESH_INSECURE %q: exit %d, want %d",
				tc.addr, tc.insecure, code, exitcode.Invalid)
		}
	}
	t.Setenv("AGENTMESH_INSECURE", "")

	keysConfig(t, "  allow_plaintext_keys: true\n")
	_, port, err := net.SplitHostPort(grpctest.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LISTEN_ADDR", net.JoinHostPort("0.0.0.0", port))
	exited := make(chan int, 1)
	go func() { exited <- run("orchestrator", "127.0.0.1:0", true, nil, ok) }()
	conn, err := dial.New(net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		select {
		case code := <-exited:
			t.Fatalf("with auth.allow_plaintext_keys the server exited %d", code)
		case <-deadline:
			t.Fatalf("with auth.allow_plaintext_keys the server never served: %v", err)
		case <-tick.C:
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exited; code != exitcode.OK {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

// TestKeysFileInClearTextBeyondLoopback: API keys kept in auth.api_keys_file are refused in
// clear text beyond loopback as auth.api_keys are; the check looked at auth.api_keys only.
func TestKeysFileInClearTextBeyondLoopback(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys.yaml")
	keys := "api_keys:\n  - {hash: \"sha256:785425b6b91c591fa749c00b770e9b88ff4c4e68" +
		"f59bb5fd768d14bc683c4b7a\", user: alice}\n"
	if err := os.WriteFile(file, []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	a := config.Auth{APIKeysFile: file}
	err := CheckPlaintextKeys("0.0.0.0:7000", a, nil)
	if err == nil || !strings.Contains(err.Error(), "auth.api_keys_file") {
		t.Errorf("a keys file in clear text on 0.0.0.0: %v, want it refused naming it", err)
	}
	a.AllowPlaintextKeys = true
	if err := CheckPlaintextKeys("0.0.0.0:7000", a, nil); err != nil {
		t.Errorf("with auth.allow_plaintext_keys: %v", err)
	}
}

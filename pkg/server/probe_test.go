package server

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
)

// startProbed starts a server on a free loopback address with opts, points LISTEN_ADDR at it
// for probe, and shuts it down at the end of the test.
func startProbed(t *testing.T, opts Options) *Server {
	t.Helper()
	listenOnFreeAddr(t)
	opts.Name, opts.Addr = "intent", "127.0.0.1:0"
	srv := New(opts)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(t.Context()) })
	t.Setenv("LISTEN_ADDR", srv.Addr())
	return srv
}

// TestHealthCommand (issue 14.5): `<service> health` exits 0 while the server serves, 1 while it
// reports NOT_SERVING and 3 when nothing listens, so that images without a shell have a
// healthcheck.
func TestHealthCommand(t *testing.T) {
	startProbed(t, Options{})
	if code := probe("127.0.0.1:0", false, io.Discard); code != exitcode.OK {
		t.Errorf("probe of a serving server = %d, want 0", code)
	}
	// A stage with a certificate but no mesh CA serves plaintext, like Main.
	dev := newDevPKI(t)
	t.Setenv("TLS_CERT", dev.intent.Cert)
	t.Setenv("TLS_KEY", dev.intent.Key)
	if code := probe("127.0.0.1:0", false, io.Discard); code != exitcode.OK {
		t.Errorf("probe of a plaintext stage with tls.cert = %d, want 0", code)
	}
	t.Setenv("TLS_CERT", "")
	t.Setenv("TLS_KEY", "")
	startProbed(t, Options{Health: HealthFunc(func() (bool, <-chan struct{}) { return false, make(chan struct{}) })})
	if code := probe("127.0.0.1:0", false, io.Discard); code != exitcode.Failed {
		t.Errorf("probe of a NOT_SERVING server = %d, want 1", code)
	}

	t.Setenv("LISTEN_ADDR", grpctest.FreeAddr(t)) // nothing listens on it
	if code := probe("127.0.0.1:0", false, io.Discard); code != exitcode.Unavailable {
		t.Errorf("probe of no server = %d, want 3", code)
	}
}

// TestHealthCommandSpeaksMutualTLS: with the mesh's TLS_CA, TLS_CERT and TLS_KEY the probe
// presents the process's certificate to a server that takes only mesh identities.
func TestHealthCommandSpeaksMutualTLS(t *testing.T) {
	dev := newDevPKI(t)
	mesh, err := config.TLS{CA: dev.ca, Cert: dev.intent.Cert, Key: dev.intent.Key}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	startProbed(t, Options{Mesh: mesh})
	if code := probe("127.0.0.1:0", false, io.Discard); code != exitcode.Unavailable {
		t.Errorf("plaintext probe of a mutual TLS server = %d, want 3", code)
	}
	t.Setenv("TLS_CA", dev.ca)
	t.Setenv("TLS_CERT", dev.intent.Cert)
	t.Setenv("TLS_KEY", dev.intent.Key)
	if code := probe("127.0.0.1:0", false, io.Discard); code != exitcode.OK {
		t.Errorf("mutual TLS probe = %d, want 0", code)
	}
}

// TestHealthCommandOfThePublicAPI: the orchestrator's probe speaks TLS to the public API, whose
// health needs no client certificate.
func TestHealthCommandOfThePublicAPI(t *testing.T) {
	dev := newDevPKI(t)
	clients, err := certs.NewCA("clients CA")
	if err != nil {
		t.Fatal(err)
	}
	clientCA := filepath.Join(t.TempDir(), "clients-ca.pem")
	if err := clients.WriteCert(clientCA); err != nil {
		t.Fatal(err)
	}
	tlsCfg := config.TLS{CA: dev.ca, Cert: dev.orchestrator.Cert, Key: dev.orchestrator.Key}
	authn, serverTLS, err := PublicSecurity(config.Auth{ClientCA: clientCA}, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	startProbed(t, Options{Auth: authn, TLS: serverTLS})
	t.Setenv("TLS_CA", dev.ca)
	t.Setenv("TLS_CERT", dev.orchestrator.Cert)
	t.Setenv("TLS_KEY", dev.orchestrator.Key)
	if code := probe("127.0.0.1:0", true, io.Discard); code != exitcode.OK {
		t.Errorf("probe of the public API = %d, want 0", code)
	}
}

func TestLoopbackOf(t *testing.T) {
	for addr, want := range map[string]string{
		":7001":          "127.0.0.1:7001",
		"0.0.0.0:7001":   "127.0.0.1:7001",
		"[::]:7001":      "[::1]:7001",
		"10.0.0.5:7001":  "10.0.0.5:7001",
		"planning:7002":  "planning:7002",
		"127.0.0.1:7001": "127.0.0.1:7001",
		"not an address": "not an address",
	} {
		if got := loopbackOf(addr); got != want {
			t.Errorf("loopbackOf(%q) = %q, want %q", addr, got, want)
		}
	}
}

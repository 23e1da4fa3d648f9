package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serveHealth serves the health service on a loopback port with creds until the test ends,
// and returns its address.
func serveHealth(t *testing.T, creds credentials.TransportCredentials) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// testPKI is a CA whose certificates a test issues.
type testPKI struct {
	ca   *certs.CA
	dir  string
	pool *x509.CertPool
}

// newTestPKI makes a CA named name.
func newTestPKI(t *testing.T, name string) *testPKI {
	t.Helper()
	ca, err := certs.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	p := &testPKI{ca: ca, dir: t.TempDir(), pool: pool}
	if err := ca.WriteCert(filepath.Join(p.dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	return p
}

// pair issues a certificate for s.
func (p *testPKI) pair(t *testing.T, s certs.Subject) tls.Certificate {
	t.Helper()
	cert, key, err := p.ca.Issue(s)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// mesh returns the mutual TLS of service, with a certificate of the CA.
func (p *testPKI) mesh(t *testing.T, service string) *auth.MeshTLS {
	t.Helper()
	pair, err := p.ca.Write(p.dir, service, certs.Service(service))
	if err != nil {
		t.Fatal(err)
	}
	m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: filepath.Join(p.dir, "ca.pem"), Cert: pair.Cert, Key: pair.Key}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestHandshakeRefusals: a call whose connection's TLS handshake refused credentials fails with
// a *handshakeRefused, told by the types of the handshake's failure, not by the words of the
// call's status: a server certificate of another CA, a mesh server of another identity
// (auth.ServerCertError), a server that speaks no TLS, an alert of a server that refuses the
// client's certificate (crypto/tls's *net.OpError of tlsAlertOp, whose alert receivedAlert
// reads: this pins both). Under TLS 1.3 the server refuses the client's certificate after the
// client's side of the handshake completed, and the call failed "broken pipe" or "connection
// reset" as often as with the alert: every try tells the refusal, with the alert, for a
// certificate of another CA, a revoked one, an expired one, and none where one is required. A
// server that cuts the connection in the handshake is the network's, and so is one that
// answers nothing.
func TestHandshakeRefusals(t *testing.T) {
	mesh, other := newTestPKI(t, "mesh CA"), newTestPKI(t, "another CA")
	server := mesh.pair(t, certs.Subject{CommonName: "server", Hosts: []string{"127.0.0.1"}, Server: true})
	serverTLS := func(cfg *tls.Config) string {
		cfg.Certificates = []tls.Certificate{server}
		return serveHealth(t, credentials.NewTLS(cfg))
	}
	tlsServer := serverTLS(&tls.Config{})
	// TLS 1.2: a server refuses the client's certificate within the handshake, with an alert.
	clientCA12Server := serverTLS(&tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: mesh.pool,
		MaxVersion: tls.VersionTLS12})
	// TLS 1.3: after the client's side of the handshake completed.
	clientCAServer := serverTLS(&tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: mesh.pool})
	revokingServer := serverTLS(&tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: mesh.pool,
		VerifyConnection: func(cs tls.ConnectionState) error { // as auth.client_crl refuses one
			if len(cs.PeerCertificates) > 0 {
				return errors.New("the certificate is revoked")
			}
			return nil
		}})
	laterServer := serverTLS(&tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: mesh.pool,
		Time: func() time.Time { return time.Now().Add(2 * certs.Validity) }}) // every certificate expired
	planning := serveHealth(t, credentials.NewTLS(mesh.mesh(t, "planning").ServerConfig()))
	plaintext := serveHealth(t, insecure.NewCredentials())
	cut, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cut.Close() })
	go func() {
		for {
			c, err := cut.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nothing := silent.Addr().String()
	_ = silent.Close()

	presenting := func(cert tls.Certificate) credentials.TransportCredentials {
		return credentials.NewTLS(&tls.Config{RootCAs: mesh.pool,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }})
	}
	foreign := presenting(other.pair(t, certs.Subject{CommonName: "cli", Client: true}))
	own := presenting(mesh.pair(t, certs.Subject{CommonName: "cli", Client: true}))
	anonymous := credentials.NewTLS(&tls.Config{RootCAs: mesh.pool})
	for _, tc := range []struct {
		name    string
		addr    string
		creds   credentials.TransportCredentials
		refused bool
		alert   tls.AlertError // the alert of a refused certificate (certificateRefused)
	}{
		{"a server of the CA", tlsServer, anonymous, false, 0},
		{"a server of another CA", tlsServer, credentials.NewTLS(&tls.Config{RootCAs: other.pool}), true, 0},
		{"a mesh server of another identity", planning, credentials.NewTLS(mesh.mesh(t, "context").ClientConfig("memory")), true, 0},
		{"a plaintext server", plaintext, anonymous, true, 0},
		{"TLS 1.2, a certificate of another CA", clientCA12Server, foreign, true, alertUnknownCA},
		{"TLS 1.3, a certificate of the CA", clientCAServer, own, false, 0},
		{"TLS 1.3, a certificate of another CA", clientCAServer, foreign, true, alertUnknownCA},
		{"TLS 1.3, a revoked certificate", revokingServer, own, true, alertBadCertificate},
		{"TLS 1.3, an expired certificate", laterServer, own, true, alertCertificateExpired},
		{"TLS 1.3, no certificate where one is required", clientCAServer, anonymous, true, alertCertificateRequired},
		{"a server that cuts the connection", cut.Addr().String(), anonymous, false, 0},
		{"nothing listening", nothing, anonymous, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 { // a new connection each time: the refusal is told whatever gRPC reads first
				conn, err := grpc.NewClient(tc.addr, recordHandshakes(tc.creds).dialOptions()...)
				if err != nil {
					t.Fatal(err)
				}
				_, err = healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
				_ = conn.Close()
				var refused *handshakeRefused
				if errors.As(err, &refused) != tc.refused {
					t.Fatalf("%v: a refused handshake %v, want %v", err, !tc.refused, tc.refused)
				}
				alert, _ := receivedAlert(err)
				if certificateRefused(err) != (tc.alert != 0) || alert != tc.alert {
					t.Fatalf("%v: the alert %d (of a refused certificate: %v), want %d", err, alert, certificateRefused(err), tc.alert)
				}
			}
		})
	}
}

// unavailableOrchestrator is a public API whose ListTools fails as the orchestrator's does
// when its own call to the action stage fails its TLS handshake: UNAVAILABLE, with the
// failure's text.
type unavailableOrchestrator struct {
	agentv1.UnimplementedAgentServiceServer
	stage string // the action stage's address, whose certificate the orchestrator refuses
}

// ListTools calls the stage and fails as the call does.
func (o unavailableOrchestrator) ListTools(ctx context.Context, _ *agentv1.ListToolsRequest) (*agentv1.ListToolsResponse, error) {
	conn, err := grpc.NewClient(o.stage, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: x509.NewCertPool()})))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return nil, stageerr.ToStatus(stageerr.FromError(err))
}

// TestAStagesHandshakeIsNotTheCLIs: an orchestrator that answers UNAVAILABLE because its own
// TLS handshake with a stage failed is not a refusal of the CLI's credentials: `agentmesh
// tools` exits 3 with the orchestrator's message, without naming AGENTMESH_CA. The CLI read the
// words of the message, and said the handshake with the orchestrator failed (exit 4), over a
// connection in plaintext. Over TLS 1.3 with a client certificate, the CLI probes the
// orchestrator after the UNAVAILABLE (handshakes.probe), which takes its certificate: exit 3
// too.
func TestAStagesHandshakeIsNotTheCLIs(t *testing.T) {
	isolate(t)
	pki := newTestPKI(t, "stage CA")
	stage := serveHealth(t, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{
		pki.pair(t, certs.Subject{CommonName: "action", Hosts: []string{"127.0.0.1"}, Server: true})}}))
	public := newTestPKI(t, "public API CA")
	cli, err := public.ca.Write(public.dir, "cli", certs.Subject{CommonName: "cli", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		env   map[string]string
	}{
		{"plaintext", insecure.NewCredentials(), nil},
		{"TLS 1.3 with a client certificate", credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{public.pair(t, certs.Subject{CommonName: "orchestrator", Hosts: []string{"127.0.0.1"}, Server: true})},
			ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: public.pool,
		}), map[string]string{envCA: filepath.Join(public.dir, "ca.pem"), envCert: cli.Cert, envKey: cli.Key}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			g := grpc.NewServer(grpc.Creds(tc.creds))
			agentv1.RegisterAgentServiceServer(g, unavailableOrchestrator{stage: stage})
			go func() { _ = g.Serve(lis) }()
			t.Cleanup(g.Stop)

			_, errOut := runCLI(t, 3, "tools", "--addr", lis.Addr().String())
			if !strings.Contains(errOut, "certificate signed by unknown authority") || strings.Contains(errOut, envCA) {
				t.Errorf("the error does not pass the orchestrator's on, or blames %s:\n%s", envCA, errOut)
			}
		})
	}
}

// TestRefusedClientCertificateExits4: the orchestrator binary with client certificates
// (auth.client_ca, auth.client_crl) over TLS 1.3, the version both ends choose, refuses the
// CLI's certificate after the CLI's side of the handshake completed: the CLI learns it only from
// its first read or write, which gRPC reports UNAVAILABLE as "broken pipe", a reset, or the
// alert's text. The CLI exits 4 naming AGENTMESH_CERT and its file and saying the orchestrator
// refused the certificate, for a certificate of another CA and one auth.client_crl revokes;
// without a certificate it exits 4 naming AGENTMESH_CERT too (UNAUTHENTICATED: the public API
// lets an API key authenticate instead). A certificate of the CA works, and an orchestrator
// that is down is exit 3 still. The CLI exited 3 for both refusals, asking whether `agentmesh
// dev` was running.
func TestRefusedClientCertificateExits4(t *testing.T) {
	isolate(t)
	t.Setenv(envAPIKey, "")
	clients := meshproc.NewPKI(t, t.TempDir())
	alice := clients.Issue(t, "alice", certs.Subject{CommonName: "alice", Organization: "acme", Client: true})
	bob := clients.Issue(t, "bob", certs.Subject{CommonName: "bob", Organization: "acme", Client: true})
	clients.Revoke(t, "bob")
	other, err := certs.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	eve, err := other.Write(t.TempDir(), "eve", certs.Subject{CommonName: "eve", Organization: "acme", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	m := meshproc.Start(t, meshproc.Options{MTLS: true, PKI: clients, Replicas: []string{meshproc.Orchestrator},
		Config: meshproc.Config{ClientCA: clients.CAFile(), ClientCRL: clients.CRLFile()}})
	orchestrator := m.Replica(t, meshproc.Orchestrator)
	t.Setenv(envCA, clients.CAFile())
	tools := func(t *testing.T, want int, pair certs.Pair) string {
		t.Helper()
		t.Setenv(envCert, pair.Cert)
		t.Setenv(envKey, pair.Key)
		_, errOut := runCLI(t, want, "tools", "--addr", orchestrator.Addr())
		return errOut
	}

	tools(t, 0, alice)
	for name, pair := range map[string]certs.Pair{"another CA's": eve, "revoked": bob} {
		t.Run(name, func(t *testing.T) {
			// Every try is a new process's handshake: the refusal must be told every time, not
			// only when gRPC happened to read the alert before it wrote.
			for range 5 {
				errOut := tools(t, 4, pair)
				if !strings.Contains(errOut, "refused the client certificate") || !strings.Contains(errOut, envCert) ||
					!strings.Contains(errOut, pair.Cert) || strings.Contains(errOut, "is `agentmesh dev` running") {
					t.Fatalf("the error does not say the orchestrator refused %s's certificate (%s):\n%s", envCert, pair.Cert, errOut)
				}
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		if errOut := tools(t, 4, certs.Pair{}); !strings.Contains(errOut, envCert) {
			t.Errorf("the error does not name %s:\n%s", envCert, errOut)
		}
	})
	t.Run("down", func(t *testing.T) {
		orchestrator.Kill(t)
		if errOut := tools(t, 3, alice); strings.Contains(errOut, "refused the client certificate") {
			t.Errorf("an orchestrator that is down refused the certificate:\n%s", errOut)
		}
	})
}

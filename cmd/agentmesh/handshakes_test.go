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
// client's certificate (crypto/tls's *net.OpError of tlsAlertOp, which this pins). A server
// that cuts the connection in the handshake is the network's, and so is one that answers
// nothing.
func TestHandshakeRefusals(t *testing.T) {
	mesh, other := newTestPKI(t, "mesh CA"), newTestPKI(t, "another CA")
	server := mesh.pair(t, certs.Subject{CommonName: "server", Hosts: []string{"127.0.0.1"}, Server: true})
	tlsServer := serveHealth(t, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{server}}))
	// TLS 1.2: a server refuses the client's certificate within the handshake, with an alert.
	clientCAServer := serveHealth(t, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{server},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: mesh.pool, MaxVersion: tls.VersionTLS12}))
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

	foreign := other.pair(t, certs.Subject{CommonName: "cli", Client: true})
	for _, tc := range []struct {
		name    string
		addr    string
		creds   credentials.TransportCredentials
		refused bool
	}{
		{"a server of the CA", tlsServer, credentials.NewTLS(&tls.Config{RootCAs: mesh.pool}), false},
		{"a server of another CA", tlsServer, credentials.NewTLS(&tls.Config{RootCAs: other.pool}), true},
		{"a mesh server of another identity", planning, credentials.NewTLS(mesh.mesh(t, "context").ClientConfig("memory")), true},
		{"a plaintext server", plaintext, credentials.NewTLS(&tls.Config{RootCAs: mesh.pool}), true},
		{"a server refusing the client's certificate", clientCAServer, credentials.NewTLS(&tls.Config{RootCAs: mesh.pool,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil }}), true},
		{"a server that cuts the connection", cut.Addr().String(), credentials.NewTLS(&tls.Config{RootCAs: mesh.pool}), false},
		{"nothing listening", nothing, credentials.NewTLS(&tls.Config{RootCAs: mesh.pool}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient(tc.addr, recordHandshakes(tc.creds).dialOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
			if refused := errors.As(err, new(*handshakeRefused)); refused != tc.refused {
				t.Errorf("%v: a refused handshake %v, want %v", err, refused, tc.refused)
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
// connection in plaintext.
func TestAStagesHandshakeIsNotTheCLIs(t *testing.T) {
	isolate(t)
	pki := newTestPKI(t, "stage CA")
	stage := serveHealth(t, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{
		pki.pair(t, certs.Subject{CommonName: "action", Hosts: []string{"127.0.0.1"}, Server: true})}}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	agentv1.RegisterAgentServiceServer(g, unavailableOrchestrator{stage: stage})
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)

	_, errOut := runCLI(t, 3, "tools", "--addr", lis.Addr().String())
	if !strings.Contains(errOut, "certificate signed by unknown authority") || strings.Contains(errOut, envCA) {
		t.Errorf("the error does not pass the orchestrator's on, or blames %s:\n%s", envCA, errOut)
	}
}

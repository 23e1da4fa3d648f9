package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"github.com/agentmesh/agentmesh/pkg/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// pki is a CA whose certificates a test writes to files.
type pki struct {
	ca  *certs.CA
	dir string
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	ca, err := certs.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{ca: ca, dir: t.TempDir()}
	if err := ca.WriteCert(p.caFile()); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pki) caFile() string { return filepath.Join(p.dir, "ca.pem") }

// write issues a certificate for s and returns its files.
func (p *pki) write(t *testing.T, name string, s certs.Subject) certs.Pair {
	t.Helper()
	pair, err := p.ca.Write(p.dir, name, s)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// mesh is the mutual TLS of service, with a certificate of this CA.
func (p *pki) mesh(t *testing.T, service string) *auth.MeshTLS {
	t.Helper()
	return p.meshOf(t, service, certs.Service(service))
}

// meshOf is the mutual TLS of a certificate of this CA for s.
func (p *pki) meshOf(t *testing.T, name string, s certs.Subject) *auth.MeshTLS {
	t.Helper()
	pair := p.write(t, name, s)
	m, err := config.TLS{CA: p.caFile(), Cert: pair.Cert, Key: pair.Key}.Mesh()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// client is a TLS configuration that trusts this CA's servers by host name and presents the
// certificate of s, issued by issuer (no certificate without an issuer).
func (p *pki) client(t *testing.T, issuer *pki, name string, s certs.Subject) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.ca.CertPEM())
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
	if issuer != nil {
		pair := issuer.write(t, name, s)
		cert, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// whoami answers Parse with the mesh identity of its caller.
type whoami struct {
	intentv1.UnimplementedIntentServiceServer
}

func (whoami) Parse(ctx context.Context, _ *intentv1.ParseRequest) (*intentv1.ParseResponse, error) {
	service, ok := auth.MeshIdentity(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "the handler ran for a caller without a mesh identity")
	}
	return &intentv1.ParseResponse{Goal: service}, nil
}

// serveMesh serves whoami with mutual TLS between services as m configures it.
func serveMesh(t *testing.T, m *auth.MeshTLS) string {
	t.Helper()
	srv := server.New(server.Options{Name: "intent", Addr: "127.0.0.1:0", Mesh: m, Logger: slog.New(slog.DiscardHandler)})
	intentv1.RegisterIntentServiceServer(srv.GRPC(), whoami{})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.WithoutCancel(t.Context())) })
	return srv.Addr()
}

func dialMesh(t *testing.T, addr string, opts ...dial.Option) *grpc.ClientConn {
	t.Helper()
	conn, err := dial.New(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestMeshServerTakesCallsOnlyFromMeshIdentities (issue 12.3): a stage serving mutual TLS
// refuses a plaintext client, a client without a certificate, one with a certificate of another
// CA (even naming a mesh identity), and one with a certificate of the mesh CA that names no mesh
// identity (which may still check health); it serves a mesh identity, whose service the handler
// reads with auth.MeshIdentity.
func TestMeshServerTakesCallsOnlyFromMeshIdentities(t *testing.T) {
	meshCA, otherCA := newPKI(t, "mesh CA"), newPKI(t, "other CA")
	addr := serveMesh(t, meshCA.mesh(t, "intent"))
	parse := func(conn *grpc.ClientConn) (string, error) {
		resp, err := intentv1.NewIntentServiceClient(conn).Parse(t.Context(), &intentv1.ParseRequest{Message: "hi"})
		return resp.GetGoal(), err
	}
	tlsConn := func(cfg *tls.Config) *grpc.ClientConn {
		return dialMesh(t, addr, dial.WithoutRetry(), dial.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cfg))))
	}

	for _, tc := range []struct {
		name string
		conn *grpc.ClientConn
		want codes.Code
	}{
		{"plaintext", dialMesh(t, addr, dial.WithoutRetry()), codes.Unavailable},
		{"no certificate", tlsConn(meshCA.client(t, nil, "", certs.Subject{})), codes.Unavailable},
		{"another CA's mesh identity", tlsConn(meshCA.client(t, otherCA, "impostor", certs.Service("orchestrator"))), codes.Unavailable},
		{"the mesh CA's certificate of a user", tlsConn(meshCA.client(t, meshCA, "alice", certs.Subject{CommonName: "alice", Client: true})), codes.PermissionDenied},
		{"the mesh CA's certificate of another trust domain", tlsConn(meshCA.client(t, meshCA, "foreign", certs.Subject{
			CommonName: "orchestrator", URIs: []string{"spiffe://example.org/orchestrator"}, Client: true,
		})), codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parse(tc.conn); status.Code(err) != tc.want {
				t.Errorf("Parse: %v, want %s", err, tc.want)
			}
		})
	}

	probe := tlsConn(meshCA.client(t, meshCA, "probe", certs.Subject{CommonName: "probe", Client: true}))
	if resp, err := healthpb.NewHealthClient(probe).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health with a certificate of the mesh CA that names no mesh identity: %v, %v; want SERVING", resp, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(probe).ServerReflectionInfo(t.Context())
	if err == nil {
		err = stream.Send(&reflectionpb.ServerReflectionRequest{
			MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: "*"},
		})
	}
	if err == nil || errors.Is(err, io.EOF) { // EOF from Send: the server ended the stream, Recv has its status
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("reflection without a mesh identity: %v, want PERMISSION_DENIED", err)
	}

	if got, err := parse(dialMesh(t, addr, dial.WithMesh(meshCA.mesh(t, "orchestrator")))); err != nil || got != "orchestrator" {
		t.Errorf("Parse from the orchestrator's mesh identity = %q, %v; want it served, the handler seeing orchestrator", got, err)
	}
}

// TestMeshClientVerifiesTheServer (issue 12.3): a service calling another accepts only a server
// whose certificate the mesh CA signed and that names a mesh identity, whatever the address it
// dialled.
func TestMeshClientVerifiesTheServer(t *testing.T) {
	meshCA, otherCA := newPKI(t, "mesh CA"), newPKI(t, "other CA")
	client := meshCA.mesh(t, "orchestrator")
	call := func(addr string) error {
		_, err := intentv1.NewIntentServiceClient(dialMesh(t, addr, dial.WithMesh(client), dial.WithoutRetry())).
			Parse(t.Context(), &intentv1.ParseRequest{Message: "hi"})
		return err
	}

	// A server with a mesh identity of another CA, which trusts the mesh CA's clients.
	pair := otherCA.write(t, "intent", certs.Service("intent"))
	impostor, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		t.Fatal(err)
	}
	// A server with the mesh CA's certificate naming no mesh identity.
	pair = meshCA.write(t, "web", certs.Subject{CommonName: "web", Hosts: []string{"127.0.0.1"}, Server: true})
	anonymous, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(meshCA.ca.CertPEM())
	for name, cert := range map[string]tls.Certificate{"another CA's mesh identity": impostor, "the mesh CA's server without a mesh identity": anonymous} {
		t.Run(name, func(t *testing.T) {
			srv := server.New(server.Options{Name: "intent", Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler), TLS: &tls.Config{
				Certificates: []tls.Certificate{cert}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert,
			}})
			intentv1.RegisterIntentServiceServer(srv.GRPC(), whoami{})
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			defer srv.Shutdown(context.WithoutCancel(t.Context()))
			if err := call(srv.Addr()); status.Code(err) != codes.Unavailable {
				t.Errorf("Parse: %v, want UNAVAILABLE (the handshake refused)", err)
			}
		})
	}

	// A mesh identity of the mesh CA is accepted on an address its certificate does not list.
	addr := serveMesh(t, meshCA.meshOf(t, "planning", certs.Subject{
		CommonName: "planning", URIs: []string{auth.MeshID("planning")}, Server: true, Client: true,
	}))
	if err := call(addr); err != nil {
		t.Errorf("Parse on the mesh's server: %v", err)
	}
}

// waitingIntent answers Parse once the call ends, with its error, after telling started.
type waitingIntent struct {
	intentv1.UnimplementedIntentServiceServer
	started chan struct{}
}

func (w waitingIntent) Parse(ctx context.Context, _ *intentv1.ParseRequest) (*intentv1.ParseResponse, error) {
	w.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStageEndsTheCallsOfARevokedCertificate: a stage with the mesh CA's CRLs (tls.crl) ends
// a call in flight, unary, UNAUTHENTICATED naming the caller's certificate and serial, once
// the CRL file is rewritten to list it, and refuses the next call on the same connection so;
// the calls of another certificate go on.
func TestStageEndsTheCallsOfARevokedCertificate(t *testing.T) {
	meshCA := newPKI(t, "mesh CA")
	crlFile := filepath.Join(meshCA.dir, "mesh.crl")
	writeCRL := func(number int64, pairs ...certs.Pair) {
		t.Helper()
		files := make([]string, len(pairs))
		for i, p := range pairs {
			files[i] = p.Cert
		}
		if err := meshCA.ca.WriteCRL(crlFile, certs.CRL{Number: number}, files...); err != nil {
			t.Fatal(err)
		}
	}
	writeCRL(1)
	intent := meshCA.write(t, "intent", certs.Service("intent"))
	m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: meshCA.caFile(), Cert: intent.Cert, Key: intent.Key, CRL: crlFile}, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Options{Name: "intent", Addr: "127.0.0.1:0", Mesh: m, Logger: slog.New(slog.DiscardHandler)})
	started := make(chan struct{}, 2)
	intentv1.RegisterIntentServiceServer(srv.GRPC(), waitingIntent{started: started})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.WithoutCancel(t.Context())) })
	caller := func(name string) (intentv1.IntentServiceClient, certs.Pair) {
		pair := meshCA.write(t, name, certs.Service("orchestrator"))
		mesh, err := auth.LoadMeshTLS(auth.MeshFiles{CA: meshCA.caFile(), Cert: pair.Cert, Key: pair.Key}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return intentv1.NewIntentServiceClient(dialMesh(t, srv.Addr(), dial.WithMesh(mesh), dial.WithoutRetry())), pair
	}
	stolen, stolenPair := caller("orchestrator-stolen")
	own, _ := caller("orchestrator")

	parse := func(client intentv1.IntentServiceClient, ctx context.Context) chan error {
		ended := make(chan error, 1)
		go func() {
			_, err := client.Parse(ctx, &intentv1.ParseRequest{Message: "hi"})
			ended <- err
		}()
		<-started
		return ended
	}
	ownCtx, cancelOwn := context.WithCancel(t.Context())
	defer cancelOwn()
	stolenCall, ownCall := parse(stolen, t.Context()), parse(own, ownCtx)

	writeCRL(2, stolenPair)
	serial, err := certs.SerialOf(stolenPair.Cert)
	if err != nil {
		t.Fatal(err)
	}
	want := "the certificate of spiffe://agentmesh/orchestrator, serial " + auth.FormatSerial(serial) + ", is revoked"
	select {
	case err := <-stolenCall:
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("the call of the revoked certificate ended %v, want UNAUTHENTICATED saying %q", err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call of the revoked certificate still runs 5s after the CRL listed it")
	}
	_, err = stolen.Parse(t.Context(), &intentv1.ParseRequest{Message: "again"})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(status.Convert(err).Message(), want) {
		t.Errorf("a new call on the revoked certificate's connection: %v, want UNAUTHENTICATED saying %q", err, want)
	}
	select {
	case err := <-ownCall:
		t.Errorf("the call of the certificate not revoked ended: %v", err)
	default:
	}
}

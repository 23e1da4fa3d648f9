package dial_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/dial"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

// reloaded is the reload interval of the client's files in the tests of revoked servers:
// short, so that a rewritten CRL applies within a test's patience.
const reloaded = 50 * time.Millisecond

// revocablePKI is a mesh CA, the directory of its files (ca.pem, the certificates it issues)
// and the file of its CRL, which a client follows.
type revocablePKI struct {
	ca  *certs.CA
	dir string
	crl string
	n   int64 // the number of the last CRL written
}

// newRevocablePKI makes a mesh CA whose CRL file first lists no certificate.
func newRevocablePKI(t *testing.T) *revocablePKI {
	t.Helper()
	ca, err := certs.NewCA("mesh CA")
	if err != nil {
		t.Fatal(err)
	}
	p := &revocablePKI{ca: ca, dir: t.TempDir()}
	if err := ca.WriteCert(filepath.Join(p.dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	p.crl = filepath.Join(p.dir, "mesh.crl")
	p.revoke(t)
	return p
}

// issue writes a certificate of service's mesh identity named name.
func (p *revocablePKI) issue(t *testing.T, name, service string) certs.Pair {
	t.Helper()
	pair, err := p.ca.Write(p.dir, name, certs.Service(service))
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// mesh is the mutual TLS of pair, following the CRL file every reloaded.
func (p *revocablePKI) mesh(t *testing.T, pair certs.Pair) *auth.MeshTLS {
	t.Helper()
	m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: filepath.Join(p.dir, "ca.pem"), Cert: pair.Cert, Key: pair.Key, CRL: p.crl}, reloaded)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// revoke rewrites the CRL file, by a rename as a secret update does, to list the certificates
// of pairs.
func (p *revocablePKI) revoke(t *testing.T, pairs ...certs.Pair) {
	t.Helper()
	p.n++
	files := make([]string, len(pairs))
	for i, pair := range pairs {
		files[i] = pair.Cert
	}
	if err := p.ca.WriteCRL(p.crl, certs.CRL{Number: p.n}, files...); err != nil {
		t.Fatal(err)
	}
}

// serialOf is the serial of pair's certificate, as auth.FormatSerial writes it.
func serialOf(t *testing.T, pair certs.Pair) string {
	t.Helper()
	s, err := certs.SerialOf(pair.Cert)
	if err != nil {
		t.Fatal(err)
	}
	return auth.FormatSerial(s)
}

// serveMesh serves srv and the health service over the mutual TLS of m on a loopback port
// until the test ends, and returns its address and health server.
func serveMesh(t *testing.T, m *auth.MeshTLS, srv *intent) (string, *health.Server) {
	t.Helper()
	return serve(t, srv, grpc.Creds(credentials.NewTLS(m.ServerConfig())))
}

// TestARevokedServerIsLeftOnAnOpenConnection: once the CRLs a client follows (tls.crl), read
// again, list the certificate of a server it has a connection open to, no call goes to that
// server any more, without waiting for a new handshake: a stream in flight ends UNAVAILABLE,
// naming the certificate and its serial as revoked after the connection was made; a new call
// to that server alone fails UNAVAILABLE naming them (the handshake of the connection made
// again refuses the server); and the calls to a target that another replica serves go to that
// replica. A call to a server of another certificate goes on.
func TestARevokedServerIsLeftOnAnOpenConnection(t *testing.T) {
	p := newRevocablePKI(t)
	revokedPair, goodPair := p.issue(t, "planning-a", "planning"), p.issue(t, "planning-b", "planning")
	a, b := &intent{name: "a"}, &intent{name: "b"}
	addrA, _ := serveMesh(t, p.mesh(t, revokedPair), a)
	addrB, healthB := serveMesh(t, p.mesh(t, goodPair), b)
	orchestrator := p.mesh(t, p.issue(t, "orchestrator", "orchestrator"))

	connA, err := dial.New(addrA, dial.WithMesh(orchestrator), dial.WithPeer("planning"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = connA.Close() })
	onA := intentv1.NewIntentServiceClient(connA)
	r := manual.NewBuilderWithScheme("stages")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: addrA}, {Addr: addrB}}})
	replicas := client(t, r.Scheme()+":///planning", dial.WithMesh(orchestrator), dial.WithPeer("planning"),
		dial.WithDialOptions(grpc.WithResolvers(r)))
	connB, err := dial.New(addrB, dial.WithMesh(orchestrator), dial.WithPeer("planning"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = connB.Close() })

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if resp, err := onA.Parse(ctx, &intentv1.ParseRequest{}); err != nil || resp.GetGoal() != "a" {
		t.Fatalf("a call to the server before its certificate is revoked: %v, %v", resp, err)
	}
	for a.calls.Load() == 0 || b.calls.Load() == 0 {
		if _, err := replicas.Parse(ctx, &intentv1.ParseRequest{}); err != nil {
			t.Fatalf("the calls of the replicas never reached both: %v", err)
		}
	}
	watchA, err := healthpb.NewHealthClient(connA).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	watchB, err := healthpb.NewHealthClient(connB).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []healthpb.Health_WatchClient{watchA, watchB} {
		if _, err := w.Recv(); err != nil {
			t.Fatalf("the first status of a stream in flight: %v", err)
		}
	}

	p.revoke(t, revokedPair)
	revoked := time.Now()
	want := "the certificate of spiffe://agentmesh/planning, serial " + serialOf(t, revokedPair) + ", is revoked"
	_, err = watchA.Recv()
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), want) ||
		!strings.Contains(st.Message(), "revoked after the connection was made") {
		t.Errorf("the stream in flight to the revoked server ended %v, want UNAVAILABLE saying %q revoked after the connection was made",
			err, want)
	}
	if d := time.Since(revoked); d > 40*reloaded {
		t.Errorf("the stream in flight to the revoked server ended %v after the revocation, want about %v", d, reloaded)
	}
	callsA := a.calls.Load()
	_, err = onA.Parse(ctx, &intentv1.ParseRequest{})
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), want) {
		t.Errorf("a new call to the revoked server alone: %v, want UNAVAILABLE saying %q", err, want)
	}
	for range 20 {
		resp, err := replicas.Parse(ctx, &intentv1.ParseRequest{})
		if err != nil || resp.GetGoal() != "b" {
			t.Fatalf("a call to the replicas after one was revoked: %v, %v; want it served by the other", resp, err)
		}
	}
	if n := a.calls.Load() - callsA; n != 0 {
		t.Errorf("the revoked server got %d calls after the stream in flight to it ended", n)
	}
	if resp, err := intentv1.NewIntentServiceClient(connB).Parse(ctx, &intentv1.ParseRequest{}); err != nil || resp.GetGoal() != "b" {
		t.Errorf("a call to the server of another certificate: %v, %v", resp, err)
	}
	healthB.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if resp, err := watchB.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("the stream in flight to the server of another certificate: %v, %v; want it open, told NOT_SERVING", resp, err)
	}
}

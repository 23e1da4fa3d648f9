package auth_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/logtest"
)

// crlPKI is a CA, its certificate's file, and the files of the certificates and CRLs it makes.
type crlPKI struct {
	ca     *certs.CA
	dir    string
	caFile string
}

// newCRLPKI makes a CA named name writing into a new directory.
func newCRLPKI(t *testing.T, name string) *crlPKI {
	t.Helper()
	ca, err := certs.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	p := &crlPKI{ca: ca, dir: t.TempDir()}
	p.caFile = filepath.Join(p.dir, "ca.pem")
	if err := ca.WriteCert(p.caFile); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue writes a certificate of the CA for s, named name.
func (p *crlPKI) issue(t *testing.T, name string, s certs.Subject) certs.Pair {
	t.Helper()
	pair, err := p.ca.Write(p.dir, name, s)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// crl is a CRL of ca revoking the certificates of pairs.
func crl(t *testing.T, ca *certs.CA, c certs.CRL, pairs ...certs.Pair) []byte {
	t.Helper()
	for _, p := range pairs {
		c.Revoked = append(c.Revoked, serialOf(t, p.Cert))
	}
	data, err := ca.RevocationList(c)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeFile replaces file with data by a rename, as a secret update does.
func writeFile(t *testing.T, file string, data []byte) {
	t.Helper()
	if err := os.WriteFile(file+".tmp", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
}

// captureLogs makes the default logger write to the returned buffer until the test ends.
func captureLogs(t *testing.T) *logtest.Buffer {
	t.Helper()
	var logs logtest.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &logs
}

// serveHandshakes serves TLS handshakes with cfg on a loopback port until the test ends, and
// returns its address and a function returning the errors of the handshakes it refused, once
// it is done with every connection it accepted.
func serveHandshakes(t *testing.T, cfg *tls.Config) (string, func() []error) {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var errs []error
	inFlight := 0
	done := make(chan struct{})
	t.Cleanup(func() { _ = lis.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			inFlight++ // before the handshake, which the client waits for
			mu.Unlock()
			err = c.(*tls.Conn).Handshake()
			_ = c.Close()
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			}
			inFlight--
			mu.Unlock()
		}
	}()
	return lis.Addr().String(), func() []error {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			mu.Lock()
			if inFlight == 0 || time.Now().After(deadline) {
				defer mu.Unlock()
				return append([]error(nil), errs...)
			}
			mu.Unlock()
		}
	}
}

// connect makes a connection to addr with cfg and reads it to its end: the error of a
// handshake that either side refused (in TLS 1.3 the client learns that the server refused its
// certificate from the server's alert, after its own side of the handshake), nil for one the
// server accepted, with the connection's state.
func connect(addr string, cfg *tls.Config) (tls.ConnectionState, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		return c.ConnectionState(), err
	}
	return c.ConnectionState(), nil
}

// lastErr is the last of errs, nil for none.
func lastErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[len(errs)-1]
}

// TestParseCRLs: a file of CRLs is PEM "X509 CRL" blocks, with text around them, or one DER
// CRL; a file holding none, a block of another type, or bytes that do not parse are errors.
func TestParseCRLs(t *testing.T) {
	p := newCRLPKI(t, "mesh CA")
	one := crl(t, p.ca, certs.CRL{Number: 1, Revoked: []*big.Int{big.NewInt(7)}})
	two := crl(t, p.ca, certs.CRL{Number: 2, Revoked: []*big.Int{big.NewInt(8), big.NewInt(9)}})
	block, _ := pem.Decode(one)
	for _, tc := range []struct {
		name  string
		data  []byte
		count int
		err   string
	}{
		{"one PEM CRL", one, 1, ""},
		{"two PEM CRLs with text around", concat(t, []byte("Certificate Revocation List (CRL):\n"), one, []byte("\n\n"), two), 2, ""},
		{"one DER CRL", block.Bytes, 1, ""},
		{"empty", []byte("\n"), 0, "holds no CRL"},
		{"a certificate", p.ca.CertPEM(), 0, `PEM block of type "CERTIFICATE"`},
		{"garbage", []byte("not a CRL"), 0, "neither PEM"},
		{"a broken PEM CRL", pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: []byte("broken")}), 0, "CRL 1: "},
	} {
		lists, err := auth.ParseCRLs(tc.data)
		switch {
		case tc.err == "" && (err != nil || len(lists) != tc.count):
			t.Errorf("%s: %d CRLs, %v; want %d", tc.name, len(lists), err, tc.count)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.err)
		}
	}
	if got := auth.FormatSerial(big.NewInt(0xABC)); got != "0ABC" {
		t.Errorf("FormatSerial(0xABC) = %q, want 0ABC as OpenSSL shows it", got)
	}
}

// concat joins its arguments.
func concat(t *testing.T, parts ...[]byte) []byte {
	t.Helper()
	return bytes.Join(parts, nil)
}

// TestCRLsMustBeSignedByTheCA: a CRL that does not parse, or that no CA of the CA file signed
// (another CA's, even of the same name), does not load: a CRLError, naming the file and the
// CRL's issuer; the mesh's and the public API's alike (FollowServerTLS naming auth.client_crl).
func TestCRLsMustBeSignedByTheCA(t *testing.T) {
	p := newCRLPKI(t, "mesh CA")
	impostor, err := certs.NewCA("mesh CA") // the same name, another key
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	own := p.issue(t, "planning", certs.Service("planning"))
	crlFile := filepath.Join(p.dir, "mesh.crl")
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"another CA of the same name", crl(t, impostor, certs.CRL{}), `the CRL of "CN=mesh CA" (1 of 1) is not signed by a CA of ` + p.caFile},
		{"another CA", concat(t, crl(t, p.ca, certs.CRL{}), crl(t, other, certs.CRL{})), `the CRL of "CN=another CA" (2 of 2) is not signed by a CA of ` + p.caFile},
		{"no CRL", []byte("not a CRL"), "neither PEM"},
	} {
		writeFile(t, crlFile, tc.data)
		_, err := auth.LoadMeshTLS(auth.MeshFiles{CA: p.caFile, Cert: own.Cert, Key: own.Key, CRL: crlFile}, 0)
		var crlErr *auth.CRLError
		if !errors.As(err, &crlErr) || crlErr.File != crlFile || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mesh, %s: %v, want a CRLError of %s saying %q", tc.name, err, crlFile, tc.want)
		}
		_, err = auth.FollowServerTLS(auth.ServerFiles{Cert: own.Cert, Key: own.Key, ClientCA: p.caFile, ClientCRL: crlFile}, 0)
		if !errors.As(err, &crlErr) || !strings.HasPrefix(err.Error(), "auth.client_crl: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("public API, %s: %v, want auth.client_crl saying %q", tc.name, err, tc.want)
		}
	}
	writeFile(t, crlFile, crl(t, p.ca, certs.CRL{}))
	if _, err := auth.LoadMeshTLS(auth.MeshFiles{CA: p.caFile, Cert: own.Cert, Key: own.Key, CRL: crlFile}, 0); err != nil {
		t.Errorf("the mesh CA's own CRL: %v", err)
	}
}

// TestMeshTLSRefusesRevokedCertificates: with the mesh CA's CRLs, a stage refuses a client
// whose certificate they list, and a client refuses such a server, at the handshake, the error
// naming the certificate's mesh identity and serial and saying it is revoked; the server logs
// the refusal with the client's address. Certificates they do not list are taken.
func TestMeshTLSRefusesRevokedCertificates(t *testing.T) {
	logs := captureLogs(t)
	p := newCRLPKI(t, "mesh CA")
	orchestrator := p.issue(t, "orchestrator", certs.Service("orchestrator"))
	stolen := p.issue(t, "orchestrator-stolen", certs.Service("orchestrator"))
	memory := p.issue(t, "memory", certs.Service("memory"))
	stolenMemory := p.issue(t, "memory-stolen", certs.Service("memory"))
	crlFile := filepath.Join(p.dir, "mesh.crl")
	writeFile(t, crlFile, crl(t, p.ca, certs.CRL{}, stolen, stolenMemory))
	load := func(pair certs.Pair) *auth.MeshTLS {
		t.Helper()
		m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: p.caFile, Cert: pair.Cert, Key: pair.Key, CRL: crlFile}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	addr, refused := serveHandshakes(t, load(memory).ServerConfig())
	if _, err := connect(addr, load(orchestrator).ClientConfig("memory")); err != nil {
		t.Fatalf("a client of a certificate not revoked: %v", err)
	}
	_, err := connect(addr, load(stolen).ClientConfig("memory"))
	if err == nil || !strings.Contains(err.Error(), "bad certificate") {
		t.Errorf("a client of a revoked certificate: %v, want it refused", err)
	}
	serial := auth.FormatSerial(serialOf(t, stolen.Cert))
	want := "certificate revoked: the certificate of spiffe://agentmesh/orchestrator, serial " + serial + ", is revoked"
	if err := lastErr(refused()); !errors.Is(err, auth.ErrRevoked) || !strings.Contains(err.Error(), want) {
		t.Errorf("the server's refusal: %v, want %q", err, want)
	}
	if l := logs.String(); !strings.Contains(l, "TLS handshake refused") || !strings.Contains(l, "peer=127.0.0.1") ||
		!strings.Contains(l, serial) {
		t.Errorf("the server did not log the refusal with the peer and the serial:\n%s", l)
	}

	// The other way round: the client refuses a server of a revoked certificate.
	revokedAddr, _ := serveHandshakes(t, load(stolenMemory).ServerConfig())
	_, err = connect(revokedAddr, load(orchestrator).ClientConfig("memory"))
	serial = auth.FormatSerial(serialOf(t, stolenMemory.Cert))
	if !errors.Is(err, auth.ErrRevoked) || !strings.Contains(err.Error(), "the server's certificate: certificate revoked: "+
		"the certificate of spiffe://agentmesh/memory, serial "+serial+", is revoked: the CRL of \"CN=mesh CA\" lists it") {
		t.Errorf("a server of a revoked certificate: %v, want it refused naming it and its serial", err)
	}
	if !strings.Contains(logs.String(), "own certificate is revoked") {
		t.Errorf("a service loading a revoked certificate of its own did not warn:\n%s", logs.String())
	}
}

// TestRevokedIntermediateIsRefused: a certificate of an intermediate CA whose own certificate
// the root's CRL lists is refused, naming that CA certificate in the chain of the service's,
// even where the CA file holds the intermediate's certificate too; a CRL of the intermediate,
// whose certificate the CA file holds, revokes the certificates it signed.
func TestRevokedIntermediateIsRefused(t *testing.T) {
	captureLogs(t)
	p := newCRLPKI(t, "mesh root CA")
	mid, err := p.ca.Intermediate("mesh intermediate CA")
	if err != nil {
		t.Fatal(err)
	}
	// chained writes a certificate of the intermediate for service with the chain to the root.
	chained := func(name, service string) certs.Pair {
		t.Helper()
		pair, err := mid.Write(p.dir, name, certs.Service(service))
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := os.ReadFile(pair.Cert)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, pair.Cert, concat(t, leaf, mid.CertPEM()))
		return pair
	}
	server, client := chained("memory", "memory"), chained("orchestrator", "orchestrator")
	direct := p.issue(t, "context", certs.Service("context")) // signed by the root
	crlFile := filepath.Join(p.dir, "mesh.crl")
	rootCRL := crl(t, p.ca, certs.CRL{Revoked: []*big.Int{mid.Serial()}})
	writeFile(t, crlFile, rootCRL)
	load := func(pair certs.Pair, caFile string) *auth.MeshTLS {
		t.Helper()
		m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: caFile, Cert: pair.Cert, Key: pair.Key, CRL: crlFile}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	addr, refused := serveHandshakes(t, load(direct, p.caFile).ServerConfig())
	if _, err := connect(addr, load(client, p.caFile).ClientConfig()); err == nil {
		t.Fatal("a client whose intermediate CA is revoked was taken")
	}
	want := `the CA certificate "CN=mesh intermediate CA" in the chain of the certificate of spiffe://agentmesh/orchestrator, serial ` +
		auth.FormatSerial(mid.Serial()) + ", is revoked"
	if err := lastErr(refused()); !errors.Is(err, auth.ErrRevoked) || !strings.Contains(err.Error(), want) {
		t.Errorf("the refusal: %v, want %q", err, want)
	}

	// The intermediate's CRL, its certificate in the CA file besides the root's.
	both := filepath.Join(p.dir, "cas.pem")
	writeFile(t, both, concat(t, p.ca.CertPEM(), mid.CertPEM()))
	midCRL, err := mid.RevocationList(certs.CRL{Revoked: []*big.Int{serialOf(t, client.Cert)}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, crlFile, concat(t, crl(t, p.ca, certs.CRL{}), midCRL))
	addr, refused = serveHandshakes(t, load(server, both).ServerConfig())
	if _, err := connect(addr, load(direct, both).ClientConfig()); err != nil {
		t.Errorf("a client of the root not revoked: %v", err)
	}
	if _, err := connect(addr, load(client, both).ClientConfig()); err == nil ||
		!strings.Contains(errText(lastErr(refused())), "spiffe://agentmesh/orchestrator, serial "+auth.FormatSerial(serialOf(t, client.Cert))) {
		t.Errorf("a client the intermediate's CRL revokes: %v (server: %v)", err, lastErr(refused()))
	}

	// The intermediate in the CA file is a root too, but the root's CRL revoking it still
	// refuses the certificates it signed: one chain of the two ends at the root.
	other := chained("orchestrator-2", "orchestrator")
	writeFile(t, crlFile, rootCRL)
	addr, refused = serveHandshakes(t, load(direct, both).ServerConfig())
	if _, err := connect(addr, load(other, both).ClientConfig()); err == nil ||
		!strings.Contains(errText(lastErr(refused())), `the CA certificate "CN=mesh intermediate CA"`) {
		t.Errorf("a client of the revoked intermediate, itself in the CA file: %v (server: %v)", err, lastErr(refused()))
	}
}

// errText is err's message, "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestRewrittenCRLApplies: a CRL file rewritten applies from the next handshake on, without a
// reload of anything else, on both sides of the mesh's mTLS and on the public API; one that no
// longer loads keeps the current CRLs in use, with a warning.
func TestRewrittenCRLApplies(t *testing.T) {
	logs := captureLogs(t)
	p := newCRLPKI(t, "mesh CA")
	orchestrator := p.issue(t, "orchestrator", certs.Service("orchestrator"))
	memory := p.issue(t, "memory", certs.Service("memory"))
	crlFile := filepath.Join(p.dir, "mesh.crl")
	writeFile(t, crlFile, crl(t, p.ca, certs.CRL{Number: 1}))
	load := func(pair certs.Pair) *auth.MeshTLS {
		t.Helper()
		m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: p.caFile, Cert: pair.Cert, Key: pair.Key, CRL: crlFile}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	server, client := load(memory), load(orchestrator)
	addr, _ := serveHandshakes(t, server.ServerConfig())
	if _, err := connect(addr, client.ClientConfig()); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}

	writeFile(t, crlFile, crl(t, p.ca, certs.CRL{Number: 2}, orchestrator))
	// The server refuses the client; the client, whose own certificate it is, refuses no
	// server, but it loaded the new CRL too (and warns that its certificate is revoked).
	if _, err := connect(addr, client.ClientConfig()); err == nil {
		t.Error("after the CRL listed the client: taken")
	}
	writeFile(t, crlFile, crl(t, p.ca, certs.CRL{Number: 3}, memory))
	if _, err := connect(addr, client.ClientConfig()); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("after the CRL listed the server: %v, want the client to refuse it", err)
	}

	writeFile(t, crlFile, []byte("-----BEGIN X509 CRL-----\nbroken\n-----END X509 CRL-----\n"))
	if _, err := connect(addr, client.ClientConfig()); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("after a broken CRL: %v, want the CRL in use to refuse the server still", err)
	}
	if !strings.Contains(logs.String(), "do not load; the current ones stay in use") {
		t.Errorf("no warning of the broken CRL:\n%s", logs.String())
	}
	writeFile(t, crlFile, crl(t, p.ca, certs.CRL{Number: 4}))
	if _, err := connect(addr, client.ClientConfig()); err != nil {
		t.Errorf("after a CRL listing neither: %v", err)
	}
}

// publicAPI is a server of FollowServerTLS for a client CA whose CRLs are in crlFile, and
// certificates of that CA.
type publicAPI struct {
	clients *crlPKI
	crlFile string
	addr    string
	refused func() []error
	roots   *x509.CertPool // the server's CA
}

// newPublicAPI serves the public API's TLS of a new server CA and client CA, with the client
// CA's CRLs in a file that is first crlPEM.
func newPublicAPI(t *testing.T, crlPEM func(*certs.CA) []byte) *publicAPI {
	t.Helper()
	servers, clients := newCRLPKI(t, "server CA"), newCRLPKI(t, "clients CA")
	api := servers.issue(t, "api", certs.Subject{CommonName: "api", Hosts: []string{"localhost"}, Server: true})
	a := &publicAPI{clients: clients, crlFile: filepath.Join(clients.dir, "clients.crl"), roots: x509.NewCertPool()}
	a.roots.AppendCertsFromPEM(servers.ca.CertPEM())
	writeFile(t, a.crlFile, crlPEM(clients.ca))
	srv, err := auth.FollowServerTLS(auth.ServerFiles{Cert: api.Cert, Key: api.Key, ClientCA: clients.caFile, ClientCRL: a.crlFile}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config()
	a.addr, a.refused = serveHandshakes(t, cfg)
	return a
}

// client is the TLS configuration of a client presenting pair (none for the zero Pair).
func (a *publicAPI) client(t *testing.T, pair certs.Pair) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: a.roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if pair != (certs.Pair{}) {
		cert, err := tls.LoadX509KeyPair(pair.Cert, pair.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// TestPublicAPIRefusesRevokedClientCertificates: the public API with auth.client_crl refuses
// a client certificate the CRL lists, naming its subject and serial, while another client
// certificate, and a client without one (an API key's), are taken; a rewritten CRL applies from
// the next handshake, in TLS 1.2 as in 1.3.
func TestPublicAPIRefusesRevokedClientCertificates(t *testing.T) {
	captureLogs(t)
	var alice, bob certs.Pair
	a := newPublicAPI(t, func(ca *certs.CA) []byte { return crl(t, ca, certs.CRL{Number: 1}) })
	alice = a.clients.issue(t, "alice", certs.Subject{CommonName: "alice", Organization: "acme", Client: true})
	bob = a.clients.issue(t, "bob", certs.Subject{CommonName: "bob", Organization: "acme", Client: true})
	writeFile(t, a.crlFile, crl(t, a.clients.ca, certs.CRL{Number: 2}, bob))
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cfg := func(pair certs.Pair) *tls.Config {
			c := a.client(t, pair)
			c.MaxVersion = version
			return c
		}
		if _, err := connect(a.addr, cfg(certs.Pair{})); err != nil {
			t.Errorf("TLS %x, no client certificate: %v", version, err)
		}
		if _, err := connect(a.addr, cfg(alice)); err != nil {
			t.Errorf("TLS %x, alice's certificate: %v", version, err)
		}
		if _, err := connect(a.addr, cfg(bob)); err == nil {
			t.Errorf("TLS %x, bob's revoked certificate: taken", version)
		}
		want := `certificate revoked: the certificate "CN=bob,O=acme", serial ` + auth.FormatSerial(serialOf(t, bob.Cert)) +
			`, is revoked: the CRL of "CN=clients CA" lists it`
		if err := lastErr(a.refused()); !strings.Contains(errText(err), want) {
			t.Errorf("TLS %x, the refusal: %v, want %q", version, err, want)
		}
	}
	writeFile(t, a.crlFile, crl(t, a.clients.ca, certs.CRL{Number: 3}, bob, alice))
	if _, err := connect(a.addr, a.client(t, alice)); err == nil {
		t.Error("alice's certificate, after the CRL was rewritten to list it: taken")
	}
}

// TestRevokedClientCannotResumeASession: a client whose certificate was revoked after it
// connected cannot resume its TLS session (whose ticket holds its certificate, verified before
// the revocation) to go on: the CRLs are checked at a resumption's handshake too.
func TestRevokedClientCannotResumeASession(t *testing.T) {
	captureLogs(t)
	a := newPublicAPI(t, func(ca *certs.CA) []byte { return crl(t, ca, certs.CRL{Number: 1}) })
	alice := a.clients.issue(t, "alice", certs.Subject{CommonName: "alice", Client: true})
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		writeFile(t, a.crlFile, crl(t, a.clients.ca, certs.CRL{Number: 1}))
		cfg := a.client(t, alice)
		cfg.MaxVersion = version
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		if _, err := connect(a.addr, cfg); err != nil {
			t.Fatalf("TLS %x, the first connection: %v", version, err)
		}
		if cs, err := connect(a.addr, cfg); err != nil || !cs.DidResume {
			t.Fatalf("TLS %x, the second connection: resumed %v, %v; want it resumed", version, cs.DidResume, err)
		}
		writeFile(t, a.crlFile, crl(t, a.clients.ca, certs.CRL{Number: 2}, alice))
		cs, err := connect(a.addr, cfg)
		if err == nil {
			t.Errorf("TLS %x, after the revocation: taken (resumed %v)", version, cs.DidResume)
		}
	}
}

// TestStaleCRLStillAppliesAndWarnsOncePerLoad: a CRL past its NextUpdate still refuses the
// certificates it lists (a revocation never expires) and is warned about once per load, not at
// every handshake.
func TestStaleCRLStillAppliesAndWarnsOncePerLoad(t *testing.T) {
	logs := captureLogs(t)
	past := time.Now().Add(-48 * time.Hour)
	stale := func(number int64, pairs ...certs.Pair) func(*certs.CA) []byte {
		return func(ca *certs.CA) []byte {
			return crl(t, ca, certs.CRL{Number: number, ThisUpdate: past, NextUpdate: past.Add(24 * time.Hour)}, pairs...)
		}
	}
	a := newPublicAPI(t, stale(1))
	bob := a.clients.issue(t, "bob", certs.Subject{CommonName: "bob", Client: true})
	warnings := func() int { return strings.Count(logs.String(), "past its next update") }
	if warnings() != 1 {
		t.Fatalf("%d warnings of the stale CRL at its load, want 1:\n%s", warnings(), logs.String())
	}
	writeFile(t, a.crlFile, stale(2, bob)(a.clients.ca))
	for range 3 {
		if _, err := connect(a.addr, a.client(t, bob)); err == nil {
			t.Error("a certificate a stale CRL lists: taken")
		}
	}
	if warnings() != 2 {
		t.Errorf("%d warnings after a second load and 3 handshakes, want 2:\n%s", warnings(), logs.String())
	}
	if l := logs.String(); !strings.Contains(l, `issuer="CN=clients CA"`) || !strings.Contains(l, "next_update="+past.Add(24*time.Hour).UTC().Format(time.RFC3339)) {
		t.Errorf("the warning does not name the CRL's issuer and next update:\n%s", l)
	}
}

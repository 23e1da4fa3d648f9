package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
)

// TestLoadMeshTLSFollowsItsFiles: a service's mesh TLS loaded from files presents, from the
// next connection on, the certificate its files were rotated to, without a restart; a new
// certificate that names another service is refused, and the current one stays in use.
func TestLoadMeshTLSFollowsItsFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("mesh CA")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := ca.WriteCert(caFile); err != nil {
		t.Fatal(err)
	}
	issue := func(name, service string) certs.Pair {
		t.Helper()
		p, err := ca.Write(dir, name, certs.Service(service))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	served := filepath.Join(dir, "served")
	rotate := func(p certs.Pair) { t.Helper(); rotateTo(t, p, served) }
	first := issue("planning-1", "planning")
	rotate(first)
	server, err := auth.LoadMeshTLS(auth.MeshFiles{CA: caFile, Cert: served + ".pem", Key: served + "-key.pem"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if server.Service() != "planning" {
		t.Fatalf("service %q, want planning", server.Service())
	}
	callerPair := issue("orchestrator", "orchestrator")
	caller, err := auth.LoadMeshTLS(auth.MeshFiles{CA: caFile, Cert: callerPair.Cert, Key: callerPair.Key}, 0)
	if err != nil {
		t.Fatal(err)
	}

	addr := serveTLS(t, server.ServerConfig())
	presented := func() *x509.Certificate { t.Helper(); return presentedAt(t, addr, caller.ClientConfig()) }
	if got, want := presented().SerialNumber, serialOf(t, first.Cert); got.Cmp(want) != 0 {
		t.Fatalf("presented serial %v, want the first certificate's %v", got, want)
	}

	second := issue("planning-2", "planning")
	rotate(second)
	if got, want := presented().SerialNumber, serialOf(t, second.Cert); got.Cmp(want) != 0 {
		t.Errorf("after the rotation: presented serial %v, want the new certificate's %v", got, want)
	}

	rotate(issue("memory", "memory"))
	if got, want := presented().SerialNumber, serialOf(t, second.Cert); got.Cmp(want) != 0 {
		t.Errorf("after a rotation to another service's certificate: presented serial %v, want the current one's %v", got, want)
	}
}

// TestFollowServerTLSFollowsItsFiles: the public API's TLS presents, from the next connection
// on, the certificate its files were rotated to; files that do not load leave the current one
// in use.
func TestFollowServerTLSFollowsItsFiles(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("public CA")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(name string) certs.Pair {
		t.Helper()
		p, err := ca.Write(dir, name, certs.Subject{CommonName: "api", Hosts: []string{"localhost"}, Server: true})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	served := filepath.Join(dir, "served")
	first := issue("api-1")
	rotateTo(t, first, served)
	srv, err := auth.FollowServerTLS(auth.ServerFiles{Cert: served + ".pem", Key: served + "-key.pem"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	addr := serveTLS(t, cfg)
	client := &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if got, want := presentedAt(t, addr, client).SerialNumber, serialOf(t, first.Cert); got.Cmp(want) != 0 {
		t.Fatalf("presented serial %v, want the first certificate's %v", got, want)
	}
	second := issue("api-2")
	rotateTo(t, second, served)
	if got, want := presentedAt(t, addr, client).SerialNumber, serialOf(t, second.Cert); got.Cmp(want) != 0 {
		t.Errorf("after the rotation: presented serial %v, want the new certificate's %v", got, want)
	}
	if err := os.WriteFile(served+".pem", []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, want := presentedAt(t, addr, client).SerialNumber, serialOf(t, second.Cert); got.Cmp(want) != 0 {
		t.Errorf("after a broken rotation: presented serial %v, want the current one's %v", got, want)
	}
}

// TestRotationToFilesOfTheSameSizeAndTimeIsFollowed: a rotation is followed when the new
// files have the size and the modification time of the old ones, as a P-256 key's always has
// the size of another and a certificate of the same CA and names often does, and as files of
// an artefact built with fixed timestamps (SOURCE_DATE_EPOCH, ko, Nix), copied with their
// times, all have the same time. Files compared by size and time were taken as unchanged, and
// the old certificate stayed in use until it expired.
func TestRotationToFilesOfTheSameSizeAndTimeIsFollowed(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA("public CA")
	if err != nil {
		t.Fatal(err)
	}
	subject := certs.Subject{CommonName: "api", Hosts: []string{"localhost"}, Server: true}
	first, err := ca.Write(dir, "api-1", subject)
	if err != nil {
		t.Fatal(err)
	}
	var second certs.Pair
	for i := 0; ; i++ { // a signature's encoding varies by a byte or two: find a twin in size
		if i == 100 {
			t.Fatal("no certificate of the first one's size in 100")
		}
		if second, err = ca.Write(dir, fmt.Sprintf("api-2-%d", i), subject); err != nil {
			t.Fatal(err)
		}
		if sizeOf(t, second.Cert) == sizeOf(t, first.Cert) &&
			sizeOf(t, second.Key) == sizeOf(t, first.Key) {
			break
		}
	}
	served := filepath.Join(dir, "served")
	rotateTo(t, first, served)
	stamp := time.Unix(315532800, 0) // the fixed time of a reproducible build
	for _, f := range []string{served + ".pem", served + "-key.pem"} {
		if err := os.Chtimes(f, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := auth.FollowServerTLS(auth.ServerFiles{Cert: served + ".pem", Key: served + "-key.pem"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	addr := serveTLS(t, cfg)
	client := &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if got := presentedAt(t, addr, client).SerialNumber; got.Cmp(serialOf(t, first.Cert)) != 0 {
		t.Fatalf("presented serial %v, want the first certificate's", got)
	}
	rotateTo(t, second, served)
	for _, f := range []string{served + ".pem", served + "-key.pem"} {
		if err := os.Chtimes(f, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	got, want := presentedAt(t, addr, client).SerialNumber, serialOf(t, second.Cert)
	if got.Cmp(want) != 0 {
		t.Errorf("after a rotation to files of the same size and time: presented serial %v, "+
			"want the new certificate's %v", got, want)
	}
}

// sizeOf is the size of the file.
func sizeOf(t *testing.T, file string) int64 {
	t.Helper()
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// rotateTo replaces the files served (served.pem and served-key.pem) with pair's, each by a
// rename, as a secret update does.
func rotateTo(t *testing.T, pair certs.Pair, served string) {
	t.Helper()
	for from, to := range map[string]string{pair.Cert: served + ".pem", pair.Key: served + "-key.pem"} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to+".tmp", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(to+".tmp", to); err != nil {
			t.Fatal(err)
		}
	}
}

// serveTLS serves TLS handshakes with cfg on a loopback port until the test ends, and returns
// its address.
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	addr, _ := serveHandshakes(t, cfg)
	return addr
}

// presentedAt is the certificate the server at addr presents to a client of cfg.
func presentedAt(t *testing.T, addr string, cfg *tls.Config) *x509.Certificate {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

// serialOf is the serial number of the certificate in the PEM file.
func serialOf(t *testing.T, file string) *big.Int {
	t.Helper()
	serial, err := certs.SerialOf(file)
	if err != nil {
		t.Fatal(err)
	}
	return serial
}

package auth_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"

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
	// rotate replaces the served files with pair's, as a secret update does.
	served := filepath.Join(dir, "served")
	rotate := func(p certs.Pair) {
		t.Helper()
		for from, to := range map[string]string{p.Cert: served + ".pem", p.Key: served + "-key.pem"} {
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

	lis, err := tls.Listen("tcp", "127.0.0.1:0", server.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	presented := func() *x509.Certificate {
		t.Helper()
		c, err := tls.Dial("tcp", lis.Addr().String(), caller.ClientConfig())
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
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

// serialOf is the serial number of the certificate in the PEM file.
func serialOf(t *testing.T, file string) *big.Int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s holds no PEM block", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber
}

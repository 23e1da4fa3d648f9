package auth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// reloaded is the reload interval of the files of the tests of calls on open connections:
// short, so that a rewritten CRL applies within a test's patience.
const reloaded = 50 * time.Millisecond

// certOf parses the certificate of a PEM file.
func certOf(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s holds no PEM block", file)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// connectedAs is the context of a call on a connection whose TLS handshake verified the
// certificate of pair against p's CA, as gRPC gives it to a server's handler.
func connectedAs(t *testing.T, p *crlPKI, pair certs.Pair) context.Context {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.ca.CertPEM())
	chains, err := certOf(t, pair.Cert).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		t.Fatal(err)
	}
	return peer.NewContext(t.Context(), &peer.Peer{
		Addr:     &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4242},
		AuthInfo: credentials.TLSInfo{State: tls.ConnectionState{VerifiedChains: chains}},
	})
}

// wantRevoked fails the test unless err refuses a call UNAUTHENTICATED naming the certificate
// of pair as revoked, with its serial, as the handshake's refusal names it.
func wantRevoked(t *testing.T, what string, err error, name string, pair certs.Pair) {
	t.Helper()
	want := name + ", serial " + auth.FormatSerial(serialOf(t, pair.Cert)) + ", is revoked"
	st := status.Convert(stageerr.ToStatus(err))
	if err == nil || !errors.Is(err, auth.ErrRevoked) || st.Code() != codes.Unauthenticated || !strings.Contains(st.Message(), want) {
		t.Errorf("%s: %v, want UNAUTHENTICATED saying %q", what, err, want)
	}
}

// publicFiles writes a server certificate of a CA of its own and returns the files of a
// public API whose client CA is clients's, with its CRLs in a file that first lists none.
func publicFiles(t *testing.T, clients *crlPKI) auth.ServerFiles {
	t.Helper()
	servers := newCRLPKI(t, "server CA")
	api := servers.issue(t, "api", certs.Subject{CommonName: "api", Hosts: []string{"localhost"}, Server: true})
	files := auth.ServerFiles{Cert: api.Cert, Key: api.Key, ClientCA: clients.caFile, ClientCRL: filepath.Join(clients.dir, "clients.crl")}
	writeFile(t, files.ClientCRL, crl(t, clients.ca, certs.CRL{Number: 1}))
	return files
}

// refused returns the error of call once it fails, as it does once the server has read the
// CRLs again (within about reloaded); the test fails if it still succeeds after 10 s.
func refused(t *testing.T, call func() error) error {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := call()
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatal("the call still succeeds 10 s after the CRL was rewritten")
		}
		time.Sleep(time.Millisecond) // between polls, not a wait for the reload
	}
}

// TestCallsOnAnOpenConnectionOfARevokedCertificateAreRefused: once the followed CRL lists a
// client certificate, a call on a connection whose handshake took it before is refused
// UNAUTHENTICATED, naming the certificate and its serial as the handshake's refusal does,
// whatever credentials it carries (an API key too); calls of another certificate, and calls
// without one, are taken. The public API's (auth.client_crl) and a stage's (tls.crl).
func TestCallsOnAnOpenConnectionOfARevokedCertificateAreRefused(t *testing.T) {
	logs := captureLogs(t)
	const method = "/agentmesh.agent.v1.AgentService/ListTools"

	t.Run("public API", func(t *testing.T) {
		clients := newCRLPKI(t, "clients CA")
		alice := clients.issue(t, "alice", certs.Subject{CommonName: "alice", Organization: "acme", Client: true})
		bob := clients.issue(t, "bob", certs.Subject{CommonName: "bob", Organization: "acme", Client: true})
		files := publicFiles(t, clients)
		srv, err := auth.FollowServerTLS(files, reloaded)
		if err != nil {
			t.Fatal(err)
		}
		key, hash := auth.NewKey()
		a, err := auth.New([]auth.Key{{Hash: hash, Principal: auth.Principal{User: "ops"}}}, &auth.CertRoles{})
		if err != nil {
			t.Fatal(err)
		}
		a.RefuseRevoked(srv)
		admit := a.Admission(slog.Default())
		aliceCall, bobCall := connectedAs(t, clients, alice), connectedAs(t, clients, bob)
		keyed := metadata.NewIncomingContext(aliceCall, metadata.Pairs("authorization", "Bearer "+key))
		for _, ctx := range []context.Context{aliceCall, bobCall, keyed} {
			if _, err := admit(ctx, method); err != nil {
				t.Fatalf("before the revocation: %v", err)
			}
		}

		writeFile(t, files.ClientCRL, crl(t, clients.ca, certs.CRL{Number: 2}, alice))
		err = refused(t, func() error { _, err := admit(aliceCall, method); return err })
		wantRevoked(t, "alice's call after the CRL listed her certificate", err, `the certificate "CN=alice,O=acme"`, alice)
		_, err = admit(keyed, method)
		wantRevoked(t, "an API key's call on alice's connection", err, `the certificate "CN=alice,O=acme"`, alice)
		if _, err := admit(bobCall, method); err != nil {
			t.Errorf("bob's call: %v", err)
		}
		if _, err := admit(metadata.NewIncomingContext(t.Context(), metadata.Pairs("x-api-key", key)), method); err != nil {
			t.Errorf("a call of an API key without a client certificate: %v", err)
		}
		if l := logs.String(); !strings.Contains(l, "call refused") || !strings.Contains(l, auth.FormatSerial(serialOf(t, alice.Cert))) {
			t.Errorf("the refusal is not logged with the certificate's serial:\n%s", l)
		}
	})

	t.Run("stage", func(t *testing.T) {
		p := newCRLPKI(t, "mesh CA")
		memory := p.issue(t, "memory", certs.Service("memory"))
		spare := p.issue(t, "orchestrator-spare", certs.Service("orchestrator"))
		own := p.issue(t, "orchestrator", certs.Service("orchestrator"))
		crlFile := filepath.Join(p.dir, "mesh.crl")
		writeFile(t, crlFile, crl(t, p.ca, certs.CRL{Number: 1}))
		m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: p.caFile, Cert: memory.Cert, Key: memory.Key, CRL: crlFile}, reloaded)
		if err != nil {
			t.Fatal(err)
		}
		admit := m.Admission(slog.Default())
		const search = "/agentmesh.memory.v1.MemoryService/Search"
		spareCall, ownCall := connectedAs(t, p, spare), connectedAs(t, p, own)
		if _, err := admit(spareCall, search); err != nil {
			t.Fatalf("before the revocation: %v", err)
		}
		writeFile(t, crlFile, crl(t, p.ca, certs.CRL{Number: 2}, spare))
		err = refused(t, func() error { _, err := admit(spareCall, search); return err })
		wantRevoked(t, "the spare certificate's call after the CRL listed it", err, "the certificate of spiffe://agentmesh/orchestrator", spare)
		if _, err := admit(ownCall, search); err != nil {
			t.Errorf("the orchestrator's own certificate: %v", err)
		}
		if _, err := admit(spareCall, "/grpc.health.v1.Health/Check"); err != nil {
			t.Errorf("health, open to every certificate: %v", err)
		}
	})
}

// TestHoldEndsTheCallsOfARevokedCertificate: the calls held (Authenticator.Hold of the public
// API with auth.client_crl, MeshTLS.Hold of a stage with tls.crl) on a connection whose client
// certificate a CRL read again lists end UNAUTHENTICATED, naming the certificate and its
// serial, within about the reload interval, with no call or handshake to read the file; the
// calls of other certificates go on. With API keys followed too, one goroutine watches both
// files, and it ends with the last call held. A call held once its certificate is revoked
// ends at once.
func TestHoldEndsTheCallsOfARevokedCertificate(t *testing.T) {
	captureLogs(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	clients := newCRLPKI(t, "clients CA")
	alice := clients.issue(t, "alice", certs.Subject{CommonName: "alice", Organization: "acme", Client: true})
	bob := clients.issue(t, "bob", certs.Subject{CommonName: "bob", Organization: "acme", Client: true})
	files := publicFiles(t, clients)
	srv, err := auth.FollowServerTLS(files, reloaded)
	if err != nil {
		t.Fatal(err)
	}
	key, hash := auth.NewKey()
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte(hash), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.FollowKeys(keysFile, reloaded, func() ([]auth.Key, error) {
		data, err := os.ReadFile(keysFile)
		if err != nil {
			return nil, err
		}
		return []auth.Key{{Hash: strings.TrimSpace(string(data)), Principal: auth.Principal{User: "ops"}}}, nil
	}, &auth.CertRoles{})
	if err != nil {
		t.Fatal(err)
	}
	a.RefuseRevoked(srv)
	hold := func(ctx context.Context) (context.Context, func()) {
		t.Helper()
		p, err := a.Authenticate(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held, release := a.Hold(auth.NewContext(ctx, p))
		if !auth.Held(held) {
			t.Fatal("a call of a client certificate whose CRLs are followed is not held")
		}
		return held, release
	}

	before := runtime.NumGoroutine()
	const calls = 20
	var aliceCalls, otherCalls []context.Context
	var releases []func()
	for range calls {
		ctx, release := hold(connectedAs(t, clients, alice))
		aliceCalls, releases = append(aliceCalls, ctx), append(releases, release)
		ctx, release = hold(connectedAs(t, clients, bob))
		otherCalls, releases = append(otherCalls, ctx), append(releases, release)
		ctx, release = hold(metadata.NewIncomingContext(t.Context(), metadata.Pairs("x-api-key", key)))
		otherCalls, releases = append(otherCalls, ctx), append(releases, release)
	}
	if n := runtime.NumGoroutine() - before; n > 1 {
		t.Errorf("holding %d calls started %d goroutines, want at most one", 3*calls, n)
	}

	writeFile(t, files.ClientCRL, crl(t, clients.ca, certs.CRL{Number: 2}, alice))
	revoked := time.Now()
	for i, ctx := range aliceCalls {
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
			t.Fatalf("alice's call %d still runs %v after her certificate was revoked", i, time.Since(revoked))
		}
		err := auth.RevokedError(ctx)
		wantRevoked(t, fmt.Sprintf("alice's call %d", i), err, `the certificate "CN=alice,O=acme"`, alice)
		if i == 0 && !strings.Contains(err.Error(), "the client certificate was revoked") {
			t.Errorf("alice's call ended %q, want it to say the client certificate was revoked", err)
		}
	}
	if d := time.Since(revoked); d > 20*reloaded {
		t.Errorf("alice's calls ended %v after the revocation, want about %v", d, reloaded)
	}
	for i, ctx := range otherCalls {
		if ctx.Err() != nil {
			t.Errorf("call %d of bob or of the API key ended: %v", i, context.Cause(ctx))
		}
	}
	aliceCall := connectedAs(t, clients, alice)
	p, err := a.Authenticate(aliceCall)
	if err != nil {
		t.Fatal(err)
	}
	late, releaseLate := a.Hold(auth.NewContext(aliceCall, p))
	releaseLate()
	wantRevoked(t, "alice's call held after the revocation", auth.RevokedError(late), `the certificate "CN=alice,O=acme"`, alice)

	// A stage's calls of a certificate the mesh CA's CRL revokes end the same way.
	mesh := newCRLPKI(t, "mesh CA")
	memory := mesh.issue(t, "memory", certs.Service("memory"))
	spare := mesh.issue(t, "orchestrator-spare", certs.Service("orchestrator"))
	crlFile := filepath.Join(mesh.dir, "mesh.crl")
	writeFile(t, crlFile, crl(t, mesh.ca, certs.CRL{Number: 1}))
	m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: mesh.caFile, Cert: memory.Cert, Key: memory.Key, CRL: crlFile}, reloaded)
	if err != nil {
		t.Fatal(err)
	}
	const search = "/agentmesh.memory.v1.MemoryService/Search"
	stageCall, releaseStage := m.Hold(connectedAs(t, mesh, spare), search)
	defer releaseStage()
	health, releaseHealth := m.Hold(connectedAs(t, mesh, spare), "/grpc.health.v1.Health/Watch")
	defer releaseHealth()
	if auth.Held(health) {
		t.Error("a stage held a health call, open to every certificate of the mesh CA")
	}
	writeFile(t, crlFile, crl(t, mesh.ca, certs.CRL{Number: 2}, spare))
	select {
	case <-stageCall.Done():
		wantRevoked(t, "the stage's call", auth.RevokedError(stageCall), "the certificate of spiffe://agentmesh/orchestrator", spare)
	case <-time.After(2 * time.Second):
		t.Fatal("the stage's call of a revoked certificate still runs")
	}

	for _, release := range releases {
		release()
	}
	// goleak waits for the goroutines that watch the files to end.
}

// TestNothingRevocableIsNotHeld: a call that nothing can revoke (a stage without CRLs, an
// Authenticator of fixed keys without CRLs, a call without a client certificate where only
// CRLs are followed, one not authenticated: health) is served in its own context, not held.
func TestNothingRevocableIsNotHeld(t *testing.T) {
	p := newCRLPKI(t, "mesh CA")
	memory := p.issue(t, "memory", certs.Service("memory"))
	m, err := auth.LoadMeshTLS(auth.MeshFiles{CA: p.caFile, Cert: memory.Cert, Key: memory.Key}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := connectedAs(t, p, memory)
	if m.Holds() {
		t.Error("a stage without CRLs holds calls")
	}
	if held, release := m.Hold(ctx, "/agentmesh.memory.v1.MemoryService/Search"); held != ctx {
		release()
		t.Error("a stage without CRLs held a call")
	}
	fixed, err := auth.New(nil, &auth.CertRoles{})
	if err != nil {
		t.Fatal(err)
	}
	if held, release := fixed.Hold(ctx); held != ctx {
		release()
		t.Error("an Authenticator of fixed keys without CRLs held a call")
	}
	clients := newCRLPKI(t, "clients CA")
	srv, err := auth.FollowServerTLS(publicFiles(t, clients), 0)
	if err != nil {
		t.Fatal(err)
	}
	fixed.RefuseRevoked(srv)
	if held, release := fixed.Hold(auth.NewContext(t.Context(), auth.Principal{User: "ops", Method: auth.MethodAPIKey})); auth.Held(held) {
		release()
		t.Error("a call without a client certificate was held for the CRLs")
	}
	alice := clients.issue(t, "alice", certs.Subject{CommonName: "alice", Client: true})
	if held, release := fixed.Hold(connectedAs(t, clients, alice)); auth.Held(held) {
		release()
		t.Error("a call not authenticated (health) was held")
	}
}

// TestCheckOfACallAllocatesNothing: the check of a call's client certificate against the
// followed CRLs (a map lookup per certificate of the verified chains) allocates nothing, and so
// reads no file, for a certificate they do not revoke; without CRLs there is no check.
func TestCheckOfACallAllocatesNothing(t *testing.T) {
	clients := newCRLPKI(t, "clients CA")
	alice := clients.issue(t, "alice", certs.Subject{CommonName: "alice", Organization: "acme", Client: true})
	bob := clients.issue(t, "bob", certs.Subject{CommonName: "bob", Organization: "acme", Client: true})
	files := publicFiles(t, clients)
	writeFile(t, files.ClientCRL, crl(t, clients.ca, certs.CRL{Number: 2}, bob))
	srv, err := auth.FollowServerTLS(files, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(nil, &auth.CertRoles{})
	if err != nil {
		t.Fatal(err)
	}
	call := connectedAs(t, clients, alice)
	if err := auth.RefuseCall(a, call); err != nil {
		t.Fatalf("without CRLs: %v", err)
	}
	a.RefuseRevoked(srv)
	if err := auth.RefuseCall(a, connectedAs(t, clients, bob)); !errors.Is(err, auth.ErrRevoked) {
		t.Fatalf("bob's revoked certificate: %v", err)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := auth.RefuseCall(a, call); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("the check of a call allocates %v times, want none", n)
	}
}

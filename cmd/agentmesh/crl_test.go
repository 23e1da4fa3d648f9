package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// crlReload bounds how long a rewritten CRL file takes to apply: the binaries look at their
// files at most every auth.ReloadInterval, at a handshake.
const crlReload = 3 * auth.ReloadInterval

// callOnce makes call on a new connection to addr with creds, closed after it: a new TLS
// handshake every time, as a certificate revoked while a connection is open is refused at the
// next handshake.
func callOnce(t *testing.T, addr string, creds credentials.TransportCredentials, call func(context.Context, grpc.ClientConnInterface) error) error {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return call(ctx, c)
}

// openConn opens a connection to addr with creds and makes call on it, so that its TLS
// handshake is done, and returns it, open until the test ends: a later call on it goes on the
// connection the handshake took, whatever a CRL rewritten since says.
func openConn(t *testing.T, addr string, creds credentials.TransportCredentials, call func(grpc.ClientConnInterface) error) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := call(c); err != nil {
		t.Fatalf("the first call on a connection to %s: %v", addr, err)
	}
	return c
}

// refusedAsRevoked reports whether err refuses a call UNAUTHENTICATED saying that the
// certificate of the connection is revoked, as want names it: a call on a connection whose
// handshake took the certificate (a new handshake is refused UNAVAILABLE).
func refusedAsRevoked(err error, want string) bool {
	return status.Code(err) == codes.Unauthenticated && strings.Contains(status.Convert(err).Message(), want)
}

// until calls cond every 200 ms until it holds, and reports whether it did within timeout.
func until(t *testing.T, timeout time.Duration, cond func() bool) bool {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) || t.Context().Err() != nil {
			return false
		}
	}
	return true
}

// TestPublicAPIRefusesRevokedClientCertificates: the orchestrator binary with auth.client_crl
// refuses, in the TLS handshake, a client certificate of auth.client_ca that the CRL lists,
// logging the refusal with its subject and serial, while another certificate of the CA works;
// the CRL file rewritten to list that one too, it is refused from the next handshake on,
// without a restart.
func TestPublicAPIRefusesRevokedClientCertificates(t *testing.T) {
	isolate(t)
	// One CA signs the services' certificates and the clients' (the harness's own, of no mesh
	// identity, checks the orchestrator's health with it).
	clients := meshproc.NewPKI(t, t.TempDir())
	alice := clients.Issue(t, "alice", certs.Subject{CommonName: "alice", Organization: "acme", Client: true})
	bob := clients.Issue(t, "bob", certs.Subject{CommonName: "bob", Organization: "acme", Client: true})
	clients.Revoke(t, "bob")
	m := meshproc.Start(t, meshproc.Options{MTLS: true, PKI: clients, Replicas: []string{meshproc.Orchestrator},
		Config: meshproc.Config{ClientCA: clients.CAFile(), ClientCRL: clients.CRLFile()}})
	replica := m.Replica(t, meshproc.Orchestrator)
	listTools := func(pair certs.Pair) error {
		return callOnce(t, replica.Addr(), m.PKI().Client(t, pair), func(ctx context.Context, c grpc.ClientConnInterface) error {
			_, err := agentv1.NewAgentServiceClient(c).ListTools(ctx, &agentv1.ListToolsRequest{})
			return err
		})
	}

	if err := listTools(alice); err != nil {
		t.Fatalf("alice's certificate: %v", err)
	}
	if err := listTools(certs.Pair{}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no client certificate: %v, want UNAUTHENTICATED (TLS, but no credentials)", err)
	}
	if err := listTools(bob); status.Code(err) != codes.Unavailable {
		t.Errorf("bob's revoked certificate: %v, want it refused in the handshake (UNAVAILABLE)", err)
	}
	serial, err := certs.SerialOf(bob.Cert)
	if err != nil {
		t.Fatal(err)
	}
	want := `the certificate \"CN=bob,O=acme\", serial ` + auth.FormatSerial(serial) + ", is revoked"
	if !until(t, 5*time.Second, func() bool { return strings.Contains(replica.Logs(), want) }) ||
		!strings.Contains(replica.Logs(), "TLS handshake refused") {
		t.Errorf("the orchestrator did not log the refusal naming bob's certificate and serial (%s):\n%s", want, replica.Logs())
	}

	// A connection alice opened before the CRL listed her certificate serves no call once it
	// does: each is refused UNAUTHENTICATED, naming her certificate and its serial.
	listOn := func(c grpc.ClientConnInterface) error {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		_, err := agentv1.NewAgentServiceClient(c).ListTools(ctx, &agentv1.ListToolsRequest{})
		return err
	}
	aliceConn := openConn(t, replica.Addr(), m.PKI().Client(t, alice), listOn)
	aliceSerial, err := certs.SerialOf(alice.Cert)
	if err != nil {
		t.Fatal(err)
	}
	aliceRevoked := `the certificate "CN=alice,O=acme", serial ` + auth.FormatSerial(aliceSerial) + ", is revoked"

	clients.Revoke(t, "bob", "alice")
	var last error
	if !until(t, crlReload, func() bool { last = listOn(aliceConn); return refusedAsRevoked(last, aliceRevoked) }) {
		t.Fatalf("a call on alice's connection opened before the CRL listed her certificate: %v, %v after the rewrite; "+
			"want UNAUTHENTICATED saying %q", last, crlReload, aliceRevoked)
	}
	if !until(t, crlReload, func() bool { return status.Code(listTools(alice)) == codes.Unavailable }) {
		t.Fatalf("alice's certificate is still taken %v after the CRL was rewritten to list it", crlReload)
	}
	if err := listTools(bob); status.Code(err) != codes.Unavailable {
		t.Errorf("bob's certificate, after the rewrite: %v, want it refused still", err)
	}
}

// TestRevokedStageIsRefusedByItsCallerAndCallee: a mesh whose tls.crl lists the context
// stage's certificate: the memory stage, which the context stage calls, refuses that
// certificate in the handshake, and the orchestrator, which calls the context stage, refuses
// it as the server, so a run ends naming it revoked; the stage itself warns that its
// certificate is revoked. The CRL file rewritten to list another certificate, the memory stage
// refuses that one too from its next handshake on, without a restart.
func TestRevokedStageIsRefusedByItsCallerAndCallee(t *testing.T) {
	isolate(t)
	m := meshproc.Start(t, meshproc.Options{MTLS: true, CRL: true, Revoked: []string{"context"},
		Replicas: []string{meshproc.Orchestrator}})
	pki := m.PKI()
	memory := m.Stage(t, "memory")
	search := func(pair certs.Pair) error {
		return callOnce(t, memory.Addr(), pki.Client(t, pair), func(ctx context.Context, c grpc.ClientConnInterface) error {
			_, err := memoryv1.NewMemoryServiceClient(c).Search(ctx, &memoryv1.SearchRequest{UserId: "alice", Query: "deploys"})
			return err
		})
	}
	serialOf := func(pair certs.Pair) string {
		s, err := certs.SerialOf(pair.Cert)
		if err != nil {
			t.Fatal(err)
		}
		return auth.FormatSerial(s)
	}
	contextCert := pki.Service("context")
	revoked := "the certificate of spiffe://agentmesh/context, serial " + serialOf(contextCert) + ", is revoked"

	// The callee: memory refuses the context stage's certificate, and takes the orchestrator's.
	if err := search(contextCert); status.Code(err) != codes.Unavailable {
		t.Errorf("memory, called with the context stage's revoked certificate: %v, want UNAVAILABLE", err)
	}
	if err := search(pki.Service(meshproc.Orchestrator)); err != nil {
		t.Errorf("memory, called with the orchestrator's certificate: %v", err)
	}
	if !until(t, 5*time.Second, func() bool { return strings.Contains(memory.Logs(), revoked) }) {
		t.Errorf("memory did not log the refusal of the context stage's certificate (%s):\n%s", revoked, memory.Logs())
	}
	if logs := m.Stage(t, "context").Logs(); !strings.Contains(logs, "own certificate is revoked") {
		t.Errorf("the context stage did not warn that its certificate is revoked:\n%s", logs)
	}

	// The caller: the orchestrator refuses the context stage as the server of its calls.
	t.Setenv(envCA, pki.CAFile())
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"run", "--json", "--addr", m.Replica(t, meshproc.Orchestrator).Addr(), "What is 6 times 7?"}, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code == 0 || !strings.Contains(out, "STAGE_UNAVAILABLE") || !strings.Contains(out, revoked) {
		t.Errorf("a run through the revoked context stage: exit %d, want it to end STAGE_UNAVAILABLE naming the certificate revoked (%s):\n%s",
			code, revoked, out)
	}

	// A rewritten CRL applies without a restart.
	spare := pki.Issue(t, "orchestrator-spare", certs.Service(meshproc.Orchestrator))
	if err := search(spare); err != nil {
		t.Fatalf("memory, called with a spare certificate of the orchestrator: %v", err)
	}
	// A connection opened with the spare certificate before the CRL listed it serves no call
	// once it does: the memory stage refuses each UNAUTHENTICATED, naming it and its serial.
	searchOn := func(c grpc.ClientConnInterface) error {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		_, err := memoryv1.NewMemoryServiceClient(c).Search(ctx, &memoryv1.SearchRequest{UserId: "alice", Query: "deploys"})
		return err
	}
	spareConn := openConn(t, memory.Addr(), pki.Client(t, spare), searchOn)
	spareRevoked := "the certificate of spiffe://agentmesh/orchestrator, serial " + serialOf(spare) + ", is revoked"
	pki.Revoke(t, "context", "orchestrator-spare")
	var last error
	if !until(t, crlReload, func() bool { last = searchOn(spareConn); return refusedAsRevoked(last, spareRevoked) }) {
		t.Fatalf("memory, called on a connection of the spare certificate opened before the CRL listed it: %v, %v after "+
			"the rewrite; want UNAUTHENTICATED saying %q", last, crlReload, spareRevoked)
	}
	if !until(t, crlReload, func() bool { return status.Code(search(spare)) == codes.Unavailable }) {
		t.Fatalf("memory still takes the spare certificate %v after the CRL was rewritten to list it", crlReload)
	}
	if err := search(pki.Service(meshproc.Orchestrator)); err != nil {
		t.Errorf("memory, called with the orchestrator's certificate after the rewrite: %v", err)
	}
}

// TestRevokedStageIsLeftOnTheOrchestratorsOpenConnection: a mesh with tls.crl whose runs go
// through the intent stage over connections the orchestrator has open; the CRL file rewritten
// to list the intent stage's certificate, the orchestrator, once it has read the file again,
// closes its connections to that stage, logging it with the certificate and its serial, and no
// call of its is sent to the stage any more: the next run ends STAGE_UNAVAILABLE naming the
// certificate revoked (the connection made again refuses it in its handshake), without
// waiting for the connections to be made again of themselves.
func TestRevokedStageIsLeftOnTheOrchestratorsOpenConnection(t *testing.T) {
	isolate(t)
	m := meshproc.Start(t, meshproc.Options{MTLS: true, CRL: true, Replicas: []string{meshproc.Orchestrator}})
	pki := m.PKI()
	orchestrator := m.Replica(t, meshproc.Orchestrator)
	t.Setenv(envCA, pki.CAFile())
	runOnce := func() (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), []string{"run", "--json", "--addr", orchestrator.Addr(), "What is 6 times 7?"}, &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := runOnce(); code != 0 {
		t.Fatalf("a run before the intent stage's certificate is revoked: exit %d\n%s", code, out)
	}

	serial, err := certs.SerialOf(pki.Service("intent").Cert)
	if err != nil {
		t.Fatal(err)
	}
	revoked := "the certificate of spiffe://agentmesh/intent, serial " + auth.FormatSerial(serial) + ", is revoked"
	pki.Revoke(t, "intent")
	var code int
	var out string
	if !until(t, crlReload, func() bool {
		code, out = runOnce()
		return code != 0
	}) {
		t.Fatalf("runs through the intent stage still succeed %v after the CRL was rewritten to list its certificate", crlReload)
	}
	if !strings.Contains(out, "STAGE_UNAVAILABLE") || !strings.Contains(out, revoked) {
		t.Errorf("a run through the revoked intent stage: exit %d, want it to end STAGE_UNAVAILABLE naming the certificate revoked (%s):\n%s",
			code, revoked, out)
	}
	logs := orchestrator.Logs()
	if !strings.Contains(logs, "connections to a server of a revoked certificate closed") || !strings.Contains(logs, revoked) {
		t.Errorf("the orchestrator did not log that it closed its connections to the revoked intent stage (%s):\n%s", revoked, logs)
	}
}

package mesh_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/services/orchestrator/runstore"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// principals of the auth tests: their API keys are made per test.
var principals = map[string]config.APIKey{
	"alice": {Tenant: "acme", User: "alice"},
	"bob":   {Tenant: "acme", User: "bob"},
	"ann":   {Tenant: "acme", User: "ann", Roles: []string{auth.RoleApprover}},
	"tom":   {Tenant: "acme", User: "tom", Roles: []string{auth.RoleTenantAdmin}},
	"eve":   {Tenant: "globex", User: "eve"},
	"root":  {User: "root", Roles: []string{auth.RoleAdmin}},
}

// withKeys configures an API key per principal and returns the keys by principal name.
func withKeys(cfg *config.Config) map[string]string {
	keys := map[string]string{}
	for name, p := range principals {
		key, hash := auth.NewKey()
		p.Hash = hash
		cfg.Auth.APIKeys = append(cfg.Auth.APIKeys, p)
		keys[name] = key
	}
	return keys
}

// keyClient is a client of the public API that sends key with every call.
func keyClient(t *testing.T, addr, key string) agentv1.AgentServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key), method, req, reply, cc, opts...)
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key), desc, cc, method, opts...)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return agentv1.NewAgentServiceClient(conn)
}

// expectCode fails the test unless err has the gRPC code want (codes.OK for no error).
func expectCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: %v (%v), want %v", what, got, err, want)
	}
}

// runOwner is the user a run acts for, as its run_started event says, read by client c.
func runOwner(t *testing.T, c agentv1.AgentServiceClient, runID string) string {
	t.Helper()
	stream, err := c.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return ev.GetRunStarted().GetUserId()
}

// TestPublicAPIAuthentication (issue 12.1, 12.2): with API keys configured, an unauthenticated
// call is UNAUTHENTICATED, a run belongs to the caller's principal whatever user_id says
// (unless an admin acts for a user), and every run RPC is allowed only to the run's owner, its
// tenant's approvers (read, approve) and tenant admins, and admins.
func TestPublicAPIAuthentication(t *testing.T) {
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	keys := withKeys(cfg)
	h := start(t, cfg)
	addr := h.mesh.Addr("orchestrator")
	as := map[string]agentv1.AgentServiceClient{}
	for name, key := range keys {
		as[name] = keyClient(t, addr, key)
	}
	pause := func(t *testing.T, c agentv1.AgentServiceClient, userID string) *typev1.RunResult {
		t.Helper()
		res, err := c.Run(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?", UserId: userID})
		if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
			t.Fatalf("run: %v %v, want it paused for approval", res.GetOutcome(), err)
		}
		return res
	}

	t.Run("calls without a valid key are refused", func(t *testing.T) {
		_, err := h.client.Run(t.Context(), &agentv1.RunRequest{Message: "hi"})
		expectCode(t, "Run without a key", err, codes.Unauthenticated)
		_, err = h.client.ListTools(t.Context(), &agentv1.ListToolsRequest{})
		expectCode(t, "ListTools without a key", err, codes.Unauthenticated)
		_, err = keyClient(t, addr, "amk_not-a-key").Run(t.Context(), &agentv1.RunRequest{Message: "hi"})
		expectCode(t, "Run with a wrong key", err, codes.Unauthenticated)
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Basic "+keys["alice"])
		_, err = h.client.Run(ctx, &agentv1.RunRequest{Message: "hi"})
		expectCode(t, "Run with a malformed authorization", err, codes.Unauthenticated)
		resp, err := grpctest.HealthClient(t, addr).Check(t.Context(), &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health without a key: %v %v, want SERVING", resp, err)
		}
	})

	alice := pause(t, as["alice"], "")
	if got := runOwner(t, as["root"], alice.GetRunId()); got != "acme/alice" {
		t.Errorf("alice's run acts for %q, want acme/alice", got)
	}
	callID := alice.GetPendingAction().GetToolCalls()[0].GetId()

	t.Run("Decide's user_id comes from the principal", func(t *testing.T) {
		_, err := as["alice"].Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", UserId: "acme/bob"})
		expectCode(t, "alice deciding for bob", err, codes.PermissionDenied)
		for _, id := range []string{"", "alice", "acme/alice"} {
			_, err = as["alice"].Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", UserId: id})
			expectCode(t, "alice deciding for user_id "+id, err, codes.OK)
		}
		_, err = as["root"].Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", UserId: "acme/bob"})
		expectCode(t, "an admin deciding for bob", err, codes.OK)
	})

	t.Run("user_id comes from the principal", func(t *testing.T) {
		_, err := as["alice"].Run(t.Context(), &agentv1.RunRequest{Message: "hi", UserId: "acme/bob"})
		expectCode(t, "alice acting for bob", err, codes.PermissionDenied)
		_, err = as["tom"].Run(t.Context(), &agentv1.RunRequest{Message: "hi", UserId: "acme/bob"})
		expectCode(t, "a tenant admin acting for bob", err, codes.PermissionDenied)
		res, err := as["alice"].Run(t.Context(), &agentv1.RunRequest{Message: "hi", UserId: "alice"})
		if err != nil || runOwner(t, as["root"], res.GetRunId()) != "acme/alice" {
			t.Errorf("alice naming herself: %v, want a run of acme/alice", err)
		}
		res, err = as["root"].Run(t.Context(), &agentv1.RunRequest{Message: "hi", UserId: "acme/bob"})
		if err != nil || runOwner(t, as["root"], res.GetRunId()) != "acme/bob" {
			t.Errorf("an admin acting for bob: %v, want a run of acme/bob", err)
		}
		// Ids no principal can have: their runs read as acme's, for acme's tenant admins.
		for _, id := range []string{"acme/research/dave", "acme/", "/dave", "/"} {
			_, err = as["root"].Run(t.Context(), &agentv1.RunRequest{Message: "hi", UserId: id})
			expectCode(t, "an admin running for user_id "+id, err, codes.InvalidArgument)
			if err != nil && !strings.Contains(err.Error(), `user_id: must be "user" or "tenant/user"`) {
				t.Errorf("an admin running for user_id %s: %v, want the field and the rule named", id, err)
			}
			_, err = as["root"].Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", UserId: id})
			expectCode(t, "an admin deciding for user_id "+id, err, codes.InvalidArgument)
		}
	})

	t.Run("run RPCs are for the owner, the tenant's approvers and admins", func(t *testing.T) {
		get := func(who string) error {
			_, err := as[who].GetRun(t.Context(), &agentv1.GetRunRequest{RunId: alice.GetRunId()})
			return err
		}
		watch := func(who string) error {
			stream, err := as[who].WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: alice.GetRunId()})
			if err == nil {
				_, err = stream.Recv()
			}
			return err
		}
		for _, tc := range []struct {
			who  string
			get  codes.Code
			rest codes.Code // WatchRun
		}{
			{"alice", codes.OK, codes.OK},
			{"bob", codes.NotFound, codes.NotFound}, // as a run that does not exist
			{"eve", codes.NotFound, codes.NotFound},
			{"ann", codes.OK, codes.OK},
			{"tom", codes.OK, codes.OK},
			{"root", codes.OK, codes.OK},
		} {
			expectCode(t, tc.who+" GetRun", get(tc.who), tc.get)
			expectCode(t, tc.who+" WatchRun", watch(tc.who), tc.rest)
		}
		// Ann, who may read the run, may not cancel it; to bob and eve it is no run.
		for who, want := range map[string]codes.Code{"bob": codes.NotFound, "eve": codes.NotFound, "ann": codes.PermissionDenied} {
			_, err := as[who].CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: alice.GetRunId()})
			expectCode(t, who+" CancelRun", err, want)
		}
		for _, who := range []string{"bob", "eve"} {
			_, err := as[who].ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: alice.GetRunId(), CallId: callID,
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
			expectCode(t, who+" ResolveApproval", err, codes.NotFound)
		}
		// The run's question is its user's.
		for who, want := range map[string]codes.Code{"bob": codes.NotFound, "eve": codes.NotFound, "ann": codes.PermissionDenied} {
			_, err := as[who].Answer(t.Context(), &agentv1.AnswerRequest{RunId: alice.GetRunId(), Answer: "go on"})
			expectCode(t, who+" Answer", err, want)
		}
		_, err := as["alice"].GetRun(t.Context(), &agentv1.GetRunRequest{RunId: "no-such-run"})
		expectCode(t, "GetRun of a run that does not exist", err, codes.NotFound)
	})

	t.Run("the tenant's approver approves, and the finished run stays the owner's", func(t *testing.T) {
		if _, err := as["ann"].ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: alice.GetRunId(), CallId: callID,
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
			t.Fatalf("ann approves: %v", err)
		}
		res := h.followAs(t, as["alice"], alice.GetRunId())
		if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
			t.Fatalf("alice's run after approval: %v %v", res.GetOutcome(), res.GetExitReason())
		}
		_, err := as["bob"].GetRun(t.Context(), &agentv1.GetRunRequest{RunId: alice.GetRunId()})
		expectCode(t, "bob reads alice's finished run", err, codes.NotFound)
	})

	t.Run("denied calls are logged with the principal, never the key", func(t *testing.T) {
		logs := h.logs.String()
		if !strings.Contains(logs, `"principal":"acme/bob","auth":"api_key","credential":"sha256:`) {
			t.Errorf("no log line of bob's denied calls:\n%s", logs)
		}
		for name, key := range keys {
			if strings.Contains(logs, key) {
				t.Errorf("%s's API key is in the logs", name)
			}
		}
	})

	t.Run("a tenant admin cancels a run of the tenant", func(t *testing.T) {
		bob := pause(t, as["bob"], "")
		if _, err := as["tom"].CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: bob.GetRunId()}); err != nil {
			t.Errorf("tom cancels bob's run: %v", err)
		}
	})
}

// followAs waits for a run to finish, following its events with client c, and returns its
// result.
func (h *harness) followAs(t *testing.T, c agentv1.AgentServiceClient, runID string) *typev1.RunResult {
	t.Helper()
	stream, err := c.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("watching %s: %v", runID, err)
		}
		if f := ev.GetRunFinished(); f != nil {
			return f.GetResult()
		}
	}
}

// certMesh is a mesh whose public API authenticates the client certificates of its CA
// (auth.client_ca), served with a certificate of that CA.
type certMesh struct {
	*harness
	ca    *certs.CA
	roots *x509.CertPool
}

// startCertMesh starts a certMesh of a new CA; edit, when not nil, changes its configuration
// last (its auth section, say).
func startCertMesh(t *testing.T, edit func(*config.Config)) *certMesh {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA("agentmesh test CA")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	serverCert, serverKey, err := ca.Issue(certs.Subject{CommonName: "orchestrator", Hosts: []string{"127.0.0.1", "localhost"}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.TLS = config.TLS{Cert: write("server.pem", serverCert), Key: write("server-key.pem", serverKey)}
	cfg.Auth.ClientCA = write("ca.pem", ca.CertPEM())
	if edit != nil {
		edit(cfg)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	return &certMesh{harness: start(t, cfg), ca: ca, roots: roots}
}

// client is a client of the public API over TLS, presenting cert (none when nil).
func (m *certMesh) client(t *testing.T, cert *tls.Certificate) agentv1.AgentServiceClient {
	t.Helper()
	cfg := &tls.Config{RootCAs: m.roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient(m.mesh.Addr("orchestrator"), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return agentv1.NewAgentServiceClient(conn)
}

// issueClient is a client certificate of s, signed by ca.
func issueClient(t *testing.T, ca *certs.CA, s certs.Subject) *tls.Certificate {
	t.Helper()
	s.Client = true
	certPEM, keyPEM, err := ca.Issue(s)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// TestPublicAPIClientCertificates (issue 12.1): with auth.client_ca, a client certificate the
// CA signed authenticates its subject (common name: user, organization: tenant); a client with
// a certificate of another CA, or none, or a service's of the CA, is UNAUTHENTICATED.
func TestPublicAPIClientCertificates(t *testing.T) {
	m := startCertMesh(t, nil)
	ca := m.ca
	client := func(cert *tls.Certificate) agentv1.AgentServiceClient { return m.client(t, cert) }
	issue := func(ca *certs.CA, user, tenant string) *tls.Certificate {
		return issueClient(t, ca, certs.Subject{CommonName: user, Organization: tenant})
	}

	carol := client(issue(ca, "carol", "acme"))
	res, err := carol.Run(t.Context(), &agentv1.RunRequest{Message: "hello"})
	if err != nil || !res.GetSuccess() {
		t.Fatalf("run with carol's certificate: %v %v", res.GetExitReason(), err)
	}
	if got := runOwner(t, carol, res.GetRunId()); got != "acme/carol" {
		t.Errorf("the run acts for %q, want acme/carol", got)
	}
	other, err := certs.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	_, err = client(issue(other, "mallory", "acme")).Run(t.Context(), &agentv1.RunRequest{Message: "hello"})
	// A TLS client sends only a certificate the server's CAs issued, so this one goes unsent.
	expectCode(t, "a certificate of an unknown CA", err, codes.Unauthenticated)
	_, err = client(nil).Run(t.Context(), &agentv1.RunRequest{Message: "hello"})
	expectCode(t, "TLS without a client certificate", err, codes.Unauthenticated)

	// A tenant with a '/' would make the user id "acme/research/dave", which reads as a user
	// of tenant acme: acme's tenant admins could read, cancel and answer dave's runs. Such a
	// certificate authenticates no one, as an API key of such a tenant is refused.
	_, err = client(issue(ca, "dave", "acme/research")).Run(t.Context(), &agentv1.RunRequest{Message: "hello"})
	expectCode(t, "a certificate whose organization holds a '/'", err, codes.Unauthenticated)
	if err != nil && !strings.Contains(status.Convert(err).Message(), "organization") {
		t.Errorf("the refusal does not say what is wrong: %v", err)
	}

	// A control character in the user id (here C1's CSI) is refused in a request's user_id
	// and an API key's user: the certificate authenticates no one either.
	_, err = client(issue(ca, "eve\u009b2J", "acme")).Run(t.Context(), &agentv1.RunRequest{Message: "hello"})
	expectCode(t, "a certificate whose common name holds a control character", err, codes.Unauthenticated)

	// A user id over 256 bytes is refused by every stage a run calls (the context stage's
	// Assemble, the memory stage): the certificate authenticates no one, rather than starting
	// runs that fail halfway.
	_, err = client(issue(ca, strings.Repeat("d", 300), "acme")).Run(t.Context(), &agentv1.RunRequest{Message: "hello"})
	expectCode(t, "a certificate naming a user id over 256 bytes", err, codes.Unauthenticated)
	if err != nil && !strings.Contains(status.Convert(err).Message(), "at most 256") {
		t.Errorf("the refusal does not say what is wrong: %v", err)
	}

	// With one CA for the mesh and the public API's clients, a service's certificate (its
	// mesh identity, common name its service) reached the API as a user named after the
	// service: it is a service's, never a user's.
	svcPEM, svcKeyPEM, err := ca.Issue(certs.Service("action"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tls.X509KeyPair(svcPEM, svcKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client(&svc).Run(t.Context(), &agentv1.RunRequest{Message: "hello"})
	expectCode(t, "a service's certificate", err, codes.Unauthenticated)
	if err != nil && !strings.Contains(status.Convert(err).Message(), "mesh identity") {
		t.Errorf("the refusal does not say what is wrong: %v", err)
	}
}

// TestClientCertificateRoles: the roles a client certificate grants are those auth.client_roles
// and auth.client_ou_roles say. By default an organizational unit that names a role grants it:
// a certificate of OU=admin may act for another user. With client_roles: none it may not, and
// with a mapping only a mapped OU grants a role: OU=admin, unmapped, grants none, and the OU
// mapped to admin grants admin.
func TestClientCertificateRoles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		auth  func(*config.Auth)
		admin map[string]bool // by the OU of a certificate: whether it acts as an admin
	}{
		{"the default", nil, map[string]bool{auth.RoleAdmin: true, "agentmesh-admins": false}},
		{"none", func(a *config.Auth) { a.ClientRoles = config.ClientRolesNone },
			map[string]bool{auth.RoleAdmin: false, "agentmesh-admins": false}},
		{"mapped", func(a *config.Auth) { a.ClientOURoles = map[string]string{"agentmesh-admins": auth.RoleAdmin} },
			map[string]bool{auth.RoleAdmin: false, "agentmesh-admins": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startCertMesh(t, func(cfg *config.Config) {
				if tc.auth != nil {
					tc.auth(&cfg.Auth)
				}
			})
			for ou, admin := range tc.admin {
				c := m.client(t, issueClient(t, m.ca, certs.Subject{CommonName: "carol", Organization: "acme",
					OrganizationalUnits: []string{ou}}))
				// Only an admin may act for another user.
				_, err := c.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi", UserId: "acme/bob"})
				want := codes.PermissionDenied
				if admin {
					want = codes.OK
				}
				expectCode(t, "a certificate of OU="+ou+" deciding for acme/bob", err, want)
				_, err = c.Decide(t.Context(), &agentv1.DecideRequest{Message: "hi"})
				expectCode(t, "a certificate of OU="+ou+" deciding for itself", err, codes.OK)
			}
		})
	}
}

// TestARunIDWhoseEventsAreKeptStaysTaken: without checkpoints, a caller's run_id was checked
// against the live runs and the memory stage's finished ones only; once the memory stage had
// forgotten a run (its in-memory store keeps the last keep_runs.max_runs), another user could
// start a run with its id, whose events the stream still kept, and watch them: the first
// user's message and answer. The id stays taken as long as its events are kept.
func TestARunIDWhoseEventsAreKeptStaysTaken(t *testing.T) {
	aliceKey, aliceHash := auth.NewKey()
	bobKey, bobHash := auth.NewKey()
	cfg := config.Default()
	cfg.Durability.Checkpoints = false
	cfg.Memory.KeepRuns = config.KeepRuns{MaxRuns: 1}
	cfg.Auth.APIKeys = []config.APIKey{{Hash: aliceHash, Tenant: "acme", User: "alice"}, {Hash: bobHash, Tenant: "globex", User: "bob"}}
	h := start(t, cfg)
	addr := h.mesh.Addr(mesh.Orchestrator)
	alice, bob := keyClient(t, addr, aliceKey), keyClient(t, addr, bobKey)
	first, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: "My secret project is Bluebird. What is 6 times 7?"})
	if err != nil || !first.GetSuccess() {
		t.Fatalf("alice's run: %v %v", first.GetOutcome(), err)
	}
	if _, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: "What is 2 plus 2?"}); err != nil { // the memory stage forgets the first
		t.Fatal(err)
	}
	if _, err := bob.Run(t.Context(), &agentv1.RunRequest{Message: "hello", RunId: first.GetRunId()}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("another user's run with the id of a run whose events are kept = %v, want ALREADY_EXISTS", err)
	}
	if st, err := bob.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: first.GetRunId()}); err == nil {
		if ev, err := st.Recv(); err == nil {
			t.Errorf("bob watched alice's run: %s", ev.GetRunStarted().GetMessage())
		}
	}
}

// TestAnotherUsersRunIsNotFound: a run its caller may not read is answered as a run that does
// not exist, on every RPC that names a run, wherever the run is (live on this replica or
// another, checkpointed, retired, kept by the memory stage alone): NOT_FOUND with the same
// message. PERMISSION_DENIED for another user's run, and NOT_FOUND for an unknown id, told
// anyone which run ids exist. A principal that may read a run is told PERMISSION_DENIED for
// what its roles do not allow with it; and an idempotency key names only its user's runs.
func TestAnotherUsersRunIsNotFound(t *testing.T) {
	for _, checkpoints := range []bool{true, false} {
		t.Run(map[bool]string{true: "checkpoints", false: "no checkpoints"}[checkpoints], func(t *testing.T) {
			cfg := config.Default()
			cfg.Tools.RequireApproval = []string{"calculator"}
			cfg.Durability.Checkpoints = checkpoints
			keys := withKeys(cfg)
			replicas := 2
			if !checkpoints {
				replicas = 1
			}
			h := startReplicas(t, cfg, replicas, nil)
			as := func(who string, replica int) agentv1.AgentServiceClient {
				return keyClient(t, h.mesh.OrchestratorAddrs()[replica], keys[who])
			}
			alice := as("alice", 0)
			paused, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?", IdempotencyKey: "k1"})
			if err != nil || paused.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
				t.Fatalf("alice's run: %v %v, want it paused for approval", paused.GetOutcome(), err)
			}
			callID := paused.GetPendingAction().GetToolCalls()[0].GetId()
			done, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: "hello"})
			if err != nil || !done.GetSuccess() {
				t.Fatalf("alice's finished run: %v %v", done.GetOutcome(), err)
			}
			if checkpoints { // retired: its tombstone names its owner, the memory stage keeps its result
				deadline := time.Now().Add(time.Minute)
				for !slices.Contains(h.keys(t, runstore.FinishedBucket), done.GetRunId()) {
					if time.Now().After(deadline) {
						t.Fatal("alice's finished run never retired")
					}
					time.Sleep(10 * time.Millisecond)
				}
			}

			// answer is what a call about run id answers: its code and message, the id left out.
			type answer struct {
				code codes.Code
				msg  string
			}
			answers := func(c agentv1.AgentServiceClient, id string) map[string]answer {
				ctx := t.Context()
				out := map[string]answer{}
				add := func(rpc string, err error) {
					out[rpc] = answer{status.Code(err), strings.ReplaceAll(status.Convert(err).Message(), id, "ID")}
				}
				_, err := c.GetRun(ctx, &agentv1.GetRunRequest{RunId: id})
				add("GetRun", err)
				stream, err := c.WatchRun(ctx, &agentv1.WatchRunRequest{RunId: id})
				if err == nil {
					_, err = stream.Recv()
				}
				add("WatchRun", err)
				_, err = c.CancelRun(ctx, &agentv1.CancelRunRequest{RunId: id})
				add("CancelRun", err)
				_, err = c.ResolveApproval(ctx, &agentv1.ResolveApprovalRequest{RunId: id, CallId: callID,
					Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
				add("ResolveApproval", err)
				_, err = c.Answer(ctx, &agentv1.AnswerRequest{RunId: id, Answer: "go on"})
				add("Answer", err)
				return out
			}
			for _, who := range []string{"bob", "eve"} {
				for replica := range replicas {
					c := as(who, replica)
					unknown := answers(c, "no-such-run")
					for rpc, a := range unknown {
						if a.code != codes.NotFound {
							t.Errorf("%s %s of a run that does not exist: %v %q, want NOT_FOUND", who, rpc, a.code, a.msg)
						}
					}
					for name, id := range map[string]string{"paused": paused.GetRunId(), "finished": done.GetRunId()} {
						for rpc, a := range answers(c, id) {
							if a != unknown[rpc] {
								t.Errorf("%s on replica %d: %s of alice's %s run = %v %q, of no run %v %q: they tell the run exists",
									who, replica, rpc, name, a.code, a.msg, unknown[rpc].code, unknown[rpc].msg)
							}
						}
					}
				}
			}

			// Eve's run is no run to acme's approver and tenant admin.
			eve, err := as("eve", 0).Run(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?"})
			if err != nil || eve.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
				t.Fatalf("eve's run: %v %v", eve.GetOutcome(), err)
			}
			for _, who := range []string{"ann", "tom"} {
				for rpc, a := range answers(as(who, replicas-1), eve.GetRunId()) {
					if a.code != codes.NotFound {
						t.Errorf("%s %s of another tenant's run: %v %q, want NOT_FOUND", who, rpc, a.code, a.msg)
					}
				}
			}
			// Acme's approver sees alice's run: what her role does not allow is PERMISSION_DENIED.
			ann := as("ann", replicas-1)
			_, err = ann.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: paused.GetRunId()})
			expectCode(t, "ann cancels alice's run", err, codes.PermissionDenied)
			_, err = ann.Answer(t.Context(), &agentv1.AnswerRequest{RunId: paused.GetRunId(), Answer: "go on"})
			expectCode(t, "ann answers alice's run", err, codes.PermissionDenied)

			// Bob's key k1 is his own: it starts his run, never names alice's.
			res, err := as("bob", replicas-1).Run(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?", IdempotencyKey: "k1"})
			if err != nil || res.GetRunId() == paused.GetRunId() || runOwner(t, as("root", 0), res.GetRunId()) != "acme/bob" {
				t.Errorf("bob's run with alice's idempotency key: %v %v, want a run of his own", res.GetRunId(), err)
			}
			if got, err := alice.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: paused.GetRunId()}); err != nil ||
				got.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
				t.Errorf("alice's run after the others' calls: %v %v, want it still paused", got.GetOutcome(), err)
			}
		})
	}
}

// TestWhoHandsARunItsInputIsRecorded (seed 003: an approval creates an audit log): with
// authentication on, who approved a paused call, answered the run's question or cancelled it
// (here an approver and a tenant admin of the owner's tenant) is in the events
// (approval_resolved.decided_by, input_answered.answered_by), in the transcript entry that
// records the input, and in a cancelled run's error; with durable runs, where the input
// travels through the store, and without.
func TestWhoHandsARunItsInputIsRecorded(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoints %v", durable), func(t *testing.T) {
			const message = "Export everything."
			var keys map[string]string
			h := askMesh(t, 1, func(cfg *config.Config) {
				cfg.Durability.Checkpoints = durable
				cfg.Tools.RequireApproval = []string{"export"}
				keys = withKeys(cfg)
			}, exportScenario(message, "Here is the first page."))
			addr := h.mesh.Addr("orchestrator")
			alice, ann, tom := keyClient(t, addr, keys["alice"]), keyClient(t, addr, keys["ann"]), keyClient(t, addr, keys["tom"])

			res, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: message})
			if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
				t.Fatalf("run: %v %v, want it paused for approval", res.GetOutcome(), err)
			}
			callID := res.GetPendingAction().GetToolCalls()[0].GetId()
			if _, err := ann.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: callID,
				Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
				t.Fatalf("ann approves: %v", err)
			}
			if !eventually(t, 30*time.Second, func() bool {
				got, err := alice.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()})
				return err == nil && got.GetOutcome() == typev1.Outcome_OUTCOME_AWAITING_INPUT
			}) {
				t.Fatal("the approved run did not pause for its question")
			}
			if _, err := tom.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: "Export only the first page."}); err != nil {
				t.Fatalf("tom answers: %v", err)
			}
			final := h.followAs(t, alice, res.GetRunId())
			if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
				t.Fatalf("outcome %s %s (%v)", final.GetOutcome(), final.GetExitReason(), final.GetError())
			}
			var decidedBy, answeredBy string
			for _, ev := range eventsAs(t, alice, res.GetRunId()) {
				if d := ev.GetApprovalResolved(); d != nil {
					decidedBy = d.GetDecidedBy()
				}
				if a := ev.GetInputAnswered(); a != nil {
					answeredBy = a.GetAnsweredBy()
				}
			}
			if decidedBy != "acme/ann" || answeredBy != "acme/tom" {
				t.Errorf("decided by %q, answered by %q; want acme/ann and acme/tom", decidedBy, answeredBy)
			}
			var details []string
			for _, e := range final.GetTranscript() {
				details = append(details, e.GetDetail())
			}
			all := strings.Join(details, "\n")
			if !strings.Contains(all, "approve "+callID+" by acme/ann") || !strings.Contains(all, " by acme/tom") {
				t.Errorf("the transcript does not say who decided and who answered:\n%s", all)
			}
			if err := transcript.VerifyResult(final); err != nil {
				t.Errorf("the result does not verify: %v", err)
			}

			paused, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: message})
			if err != nil || paused.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
				t.Fatalf("second run: %v %v, want it paused for approval", paused.GetOutcome(), err)
			}
			if _, err := tom.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: paused.GetRunId(), Reason: "not today"}); err != nil {
				t.Fatalf("tom cancels: %v", err)
			}
			cancelled := h.followAs(t, alice, paused.GetRunId())
			if got := cancelled.GetError().GetMessage(); cancelled.GetOutcome() != typev1.Outcome_OUTCOME_INTERRUPTED || !strings.Contains(got, "cancelled by its caller acme/tom: not today") {
				t.Errorf("cancelled run: %s, error %q; want INTERRUPTED naming acme/tom and the reason", cancelled.GetOutcome(), got)
			}
		})
	}
}

// eventsAs is every event of a finished run, read by client c.
func eventsAs(t *testing.T, c agentv1.AgentServiceClient, runID string) []*eventv1.RunEvent {
	t.Helper()
	stream, err := c.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: runID})
	if err != nil {
		t.Fatal(err)
	}
	var events []*eventv1.RunEvent
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("watching %s: %v", runID, err)
		}
		events = append(events, ev)
		if ev.GetRunFinished() != nil {
			return events
		}
	}
}

// TestPrincipalOfAnyName: a principal's name is any text (README, "Limits": user_id is any
// principal name), "José" of tenant "Société" too. The run's user rides between the services
// as gRPC metadata, whose values gRPC sends as printable ASCII only: the stage calls of a run
// of such a user failed INTERNAL before they left the orchestrator, and so did every run of a
// user_id outside printable ASCII with authentication off. Its runs and memories work, and
// they stay its own.
func TestPrincipalOfAnyName(t *testing.T) {
	joseKey, joseHash := auth.NewKey()
	bobKey, bobHash := auth.NewKey()
	cfg := config.Default()
	cfg.Auth.APIKeys = []config.APIKey{
		{Hash: joseHash, Tenant: "Société", User: "José"},
		{Hash: bobHash, Tenant: "Société", User: "bob"},
	}
	h := start(t, cfg)
	addr := h.mesh.Addr(mesh.Orchestrator)
	jose, bob := keyClient(t, addr, joseKey), keyClient(t, addr, bobKey)
	res, err := jose.Run(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?"})
	if err != nil || !res.GetSuccess() {
		t.Fatalf("José's run: %v %s (%v) %v, want a success", res.GetOutcome(), res.GetExitReason(), res.GetError(), err)
	}
	if got := runOwner(t, jose, res.GetRunId()); got != "Société/José" {
		t.Errorf("José's run acts for %q, want Société/José", got)
	}
	if _, err := jose.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()}); err != nil {
		t.Errorf("José reads his run: %v", err)
	}
	_, err = bob.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()})
	expectCode(t, "bob reads José's run", err, codes.NotFound)
	if _, err := jose.ListMemories(t.Context(), &agentv1.ListMemoriesRequest{}); err != nil {
		t.Errorf("José lists his memories: %v", err)
	}

	// Without authentication the run's user is its user_id.
	open := start(t, config.Default())
	res, err = open.client.Run(t.Context(), &agentv1.RunRequest{Message: "What is 6 times 7?", UserId: "José"})
	if err != nil || !res.GetSuccess() {
		t.Fatalf("a run of user_id José without auth: %v %s (%v) %v, want a success", res.GetOutcome(), res.GetExitReason(), res.GetError(), err)
	}
}

// TestAKeyNamingAnotherUsersRunIsNotTheirs: a request claims its idempotency key, naming its
// run id, before it stores the run. A request whose run_id another user's run has (a
// caller-chosen id, which anyone may try) claims the key, finds the id taken, and frees the
// key; a replica that fails between the two leaves the key naming the other user's run. Alice's
// retry with her key was answered with that run, bob's message and answer, without any check
// of whose it is. A key names only its own user's runs: one naming another user's is freed,
// and the request is answered as its own (here ALREADY_EXISTS, the id being taken).
func TestAKeyNamingAnotherUsersRunIsNotTheirs(t *testing.T) {
	cfg := config.Default()
	keys := withKeys(cfg)
	h := start(t, cfg)
	addr := h.mesh.Addr(mesh.Orchestrator)
	alice, bob := keyClient(t, addr, keys["alice"]), keyClient(t, addr, keys["bob"])
	const secret = "My secret project is Bluebird. What is 6 times 7?"
	if res, err := bob.Run(t.Context(), &agentv1.RunRequest{Message: secret, RunId: "invoice-42"}); err != nil || !res.GetSuccess() {
		t.Fatalf("bob's run: %v %v", res.GetOutcome(), err)
	}
	store, err := runstore.Open(t.Context(), h.mesh.NATS(), runstore.Config{Replicas: 1, Storage: jetstream.FileStorage,
		LeaseTTL: 10 * time.Second, IdempotencyTTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	// The claim of alice's request whose replica failed before it found the id taken.
	if _, err := store.Claim(t.Context(), "acme/alice", "k1", runstore.KeyClaim{RunID: "invoice-42"}); err != nil {
		t.Fatal(err)
	}

	res, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: "What is 2 plus 2?", RunId: "invoice-42", IdempotencyKey: "k1"})
	if err == nil {
		t.Fatalf("alice's retry with her key was answered with bob's run %s: %q", res.GetRunId(), res.GetConversation())
	}
	expectCode(t, "alice's retry naming bob's run id", err, codes.AlreadyExists)
	res, err = alice.Run(t.Context(), &agentv1.RunRequest{Message: "What is 2 plus 2?", IdempotencyKey: "k1"})
	if err != nil || res.GetRunId() == "invoice-42" || runOwner(t, alice, res.GetRunId()) != "acme/alice" {
		t.Errorf("alice's run with the key freed: %v %v, want a run of her own", res.GetRunId(), err)
	}
}

package mesh_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/meshproc"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/certs"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/exitcode"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestMemoryBelievesOnlyAssertedUsers: with mTLS between the services, the memory stage
// believed any caller it serves about the user it acts for, so a stolen certificate of the
// action stage read any user's memories by naming the user. Now the orchestrator signs its
// word about a run's user (agentmesh-user-assertion), context assembly and knowledge_search
// forward it, and the memory stage serves a caller other than the orchestrator only for the
// user an assertion names: alice's run still recalls her memory and finds her knowledge, while
// the action stage's certificate gets nothing of hers without her assertion, with a forged
// one, or with one of another user's. So it is with the approval keys configured and with the
// pair the mesh makes without them.
func TestMemoryBelievesOnlyAssertedUsers(t *testing.T) {
	for _, configured := range []bool{true, false} {
		name := map[bool]string{true: "keys configured", false: "keys made by the mesh"}[configured]
		t.Run(name, func(t *testing.T) { testAssertedUsers(t, configured) })
	}
}

func testAssertedUsers(t *testing.T, configured bool) {
	dir := t.TempDir()
	pki := meshproc.NewPKI(t, dir)
	own := pki.Issue(t, "orchestrator", certs.Service("orchestrator"))
	stolen := pki.Issue(t, "action", certs.Service("action"))
	const question = "what is the locker code?"
	llm := llmtest.New(t, llmtest.Scenario{Match: question, Turns: []llmtest.Turn{
		call("knowledge_search", `{"query": "locker code"}`), text("Here is what I found."),
	}})
	aliceKey, aliceHash := auth.NewKey()
	cfg := config.Default()
	cfg.TLS = config.TLS{CA: pki.CAFile(), Cert: own.Cert, Key: own.Key}
	cfg.Auth.APIKeys = []config.APIKey{{Hash: aliceHash, Tenant: "acme", User: "alice"}}
	cfg.Providers["scripted"] = config.Provider{Type: "openai", BaseURL: llm.URL(), APIKey: "test-key"}
	cfg.Targets = []config.Target{{Provider: "scripted", Model: "gpt-test"}}
	var signer *grant.Signer // the orchestrator's key, when the test knows it
	if configured {
		cfg.Approvals = config.Approvals{
			SigningKey: filepath.Join(dir, "grant.key"), VerifyKey: filepath.Join(dir, "grant.pub")}
		pub, priv := grant.GenerateKey()
		err := grant.WriteKeys(cfg.Approvals.SigningKey, cfg.Approvals.VerifyKey, pub, priv)
		if err != nil {
			t.Fatal(err)
		}
		signer = grant.NewSigner(priv)
	}
	m, err := mesh.Start(t.Context(), mesh.Options{Config: cfg, Ephemeral: true, StoreDir: t.TempDir(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("start mesh: %v", err)
	}
	t.Cleanup(m.Close)

	dial := func(service string, pair certs.Pair) *grpc.ClientConn {
		conn, err := grpc.NewClient(m.Addr(service), grpc.WithTransportCredentials(pki.Client(t, pair)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	// The operator, with the orchestrator's certificate, stores and ingests for alice: the
	// orchestrator needs no assertion.
	operator := memoryv1.NewMemoryServiceClient(dial(mesh.Memory, own))
	asAlice := auth.OutgoingUser(ctx, "acme/alice")
	_, err = operator.Store(asAlice, &memoryv1.StoreRequest{UserId: "acme/alice",
		Content: &typev1.Message{Role: typev1.Role_ROLE_USER, Content: aliceMemory}})
	if err != nil {
		t.Fatalf("store alice's memory: %v", err)
	}
	docs := t.TempDir()
	doc := []byte("# Archive\n\n" + aliceKnowledge + "\n")
	if err := os.WriteFile(filepath.Join(docs, "archive.md"), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = memory.IngestDir(ctx, operator, "acme/alice", action.KnowledgeCollection, docs)
	if err != nil {
		t.Fatalf("ingest alice's knowledge: %v", err)
	}

	// Alice's run: context assembly recalls her memory, knowledge_search finds her document,
	// both through the memory stage with the orchestrator's assertion forwarded.
	api := agentv1.NewAgentServiceClient(dial(mesh.Orchestrator, certs.Pair{}))
	res, err := api.Run(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+aliceKey),
		&agentv1.RunRequest{Message: question})
	if err != nil || !res.GetSuccess() {
		t.Fatalf("alice's run: %v %s (%v), want a success", err, res.GetOutcome(), res.GetError())
	}
	if prompt := promptOf(llm.Requests()[0]); !strings.Contains(prompt, aliceMemory) {
		t.Errorf("alice's first prompt lacks her memory:\n%s", prompt)
	}
	if got := toolMessage(t, res, 0); !strings.Contains(got, aliceKnowledge) {
		t.Errorf("alice's knowledge_search returned %q, want her document", got)
	}

	// The action stage's certificate, stolen, names alice.
	thief := memoryv1.NewMemoryServiceClient(dial(mesh.Memory, stolen))
	_, foreignKey := grant.GenerateKey()
	forged := grant.NewSigner(foreignKey).SignUser("acme/alice", time.Now().Add(time.Hour))
	probes := map[string]context.Context{
		"without an assertion":        asAlice,
		"with a forged assertion":     auth.OutgoingUserAssertion(asAlice, forged),
		"with a malformed assertion":  auth.OutgoingUserAssertion(asAlice, "alice-please"),
		"naming her in user_id alone": ctx,
	}
	if signer != nil {
		probes["with bob's assertion"] = auth.OutgoingUserAssertion(asAlice,
			signer.SignUser("acme/bob", time.Now().Add(time.Hour)))
		probes["with her expired assertion"] = auth.OutgoingUserAssertion(asAlice,
			signer.SignUser("acme/alice", time.Now().Add(-time.Second)))
	}
	for name, probe := range probes {
		for _, collection := range []string{"", action.KnowledgeCollection} {
			resp, err := thief.Search(probe, &memoryv1.SearchRequest{UserId: "acme/alice",
				Query: "locker code", Collection: collection})
			code := status.Code(err)
			if (code != codes.PermissionDenied && code != codes.Unauthenticated) ||
				!strings.Contains(err.Error(), auth.UserAssertionMetadata) {
				t.Errorf("%s: Search of alice's %q with the action stage's certificate: %d results, %v;"+
					" want PERMISSION_DENIED naming %s", name, collection, len(resp.GetHits()), err,
					auth.UserAssertionMetadata)
			}
		}
	}
	if signer != nil { // the holder of the orchestrator's key is the orchestrator
		hers := signer.SignUser("acme/alice", time.Now().Add(time.Hour))
		resp, err := thief.Search(auth.OutgoingUserAssertion(asAlice, hers),
			&memoryv1.SearchRequest{UserId: "acme/alice", Query: "locker code"})
		if err != nil || len(resp.GetHits()) == 0 {
			t.Errorf("Search of alice's memories with her assertion: %d results, %v; want hers",
				len(resp.GetHits()), err)
		}
	}
}

// TestVerifyKeyAloneUnderMTLSIsAConfigError: a mesh in one process with mutual TLS and
// approvals.verify_key but no approvals.signing_key does not start (exit 4), naming both keys
// and tls.ca. Its memory stage verified the orchestrator's assertions of a run's user with the
// key, and the orchestrator, without the signing key, signed none: a run whose certificate was
// not the orchestrator's recalled nothing and its knowledge_search found nothing, the run
// succeeding all the same. Without tls.ca the memory stage verifies no assertion, and the mesh
// starts as before.
func TestVerifyKeyAloneUnderMTLSIsAConfigError(t *testing.T) {
	dir := t.TempDir()
	pki := meshproc.NewPKI(t, dir)
	own := pki.Issue(t, "agentmesh", certs.Service("agentmesh"))
	cfg := config.Default()
	cfg.Approvals.VerifyKey = filepath.Join(dir, "grant.pub")
	pub, priv := grant.GenerateKey()
	if err := grant.WriteKeys(filepath.Join(dir, "grant.key"), cfg.Approvals.VerifyKey, pub, priv); err != nil {
		t.Fatal(err)
	}
	start := func(cfg *config.Config) error {
		m, err := mesh.Start(t.Context(), mesh.Options{Config: cfg, Ephemeral: true, StoreDir: t.TempDir(),
			Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			m.Close()
		}
		return err
	}
	if err := start(cfg); err != nil {
		t.Fatalf("approvals.verify_key alone without tls.ca: %v, want the mesh to start", err)
	}
	cfg.TLS = config.TLS{CA: pki.CAFile(), Cert: own.Cert, Key: own.Key}
	err := start(cfg)
	if exitcode.Of(err) != exitcode.Invalid || !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("approvals.verify_key alone with tls.ca: %v (exit %d), want a configuration error, exit %d",
			err, exitcode.Of(err), exitcode.Invalid)
	}
	for _, want := range []string{"approvals.verify_key", "approvals.signing_key", "tls.ca", "recall and knowledge_search"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
}

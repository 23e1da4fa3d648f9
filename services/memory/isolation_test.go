package memory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// as returns a context whose calls act for the user id (with roles), as the orchestrator's do.
func as(ctx context.Context, id string, roles ...string) context.Context {
	if len(roles) > 0 {
		return auth.OutgoingPrincipal(ctx, principal(id, roles...))
	}
	return auth.OutgoingUser(ctx, id)
}

// principal is the principal of a user id "tenant/user".
func principal(id string, roles ...string) auth.Principal {
	p := auth.Principal{User: id, Roles: roles}
	if tenant, user, ok := strings.Cut(id, "/"); ok {
		p.Tenant, p.User = tenant, user
	}
	return p
}

// memoryRPCs are the RPCs about one user's memories, each called for user_id.
var memoryRPCs = map[string]func(ctx context.Context, c memoryv1.MemoryServiceClient, userID string) error{
	"Store": func(ctx context.Context, c memoryv1.MemoryServiceClient, userID string) error {
		_, err := c.Store(ctx, &memoryv1.StoreRequest{UserId: userID, Content: user("a note")})
		return err
	},
	"StoreDocument": func(ctx context.Context, c memoryv1.MemoryServiceClient,
		userID string) error {
		meta, err := structpb.NewStruct(map[string]any{memory.MetaSource: "a.md"})
		if err != nil {
			return err
		}
		_, err = c.StoreDocument(ctx, &memoryv1.StoreDocumentRequest{UserId: userID,
			Collection: "knowledge", Metadata: meta,
			Chunks: []*memoryv1.DocumentChunk{{Content: "a chunk"}}})
		return err
	},
	"Search": func(ctx context.Context, c memoryv1.MemoryServiceClient, userID string) error {
		_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: userID, Query: "note"})
		return err
	},
	"Search knowledge": func(ctx context.Context, c memoryv1.MemoryServiceClient, userID string) error {
		_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: userID, Query: "note", Collection: "knowledge"})
		return err
	},
	"List": func(ctx context.Context, c memoryv1.MemoryServiceClient, userID string) error {
		_, err := c.List(ctx, &memoryv1.ListRequest{UserId: userID, Collection: "knowledge"})
		return err
	},
	"Delete": func(ctx context.Context, c memoryv1.MemoryServiceClient, userID string) error {
		_, err := c.Delete(ctx, &memoryv1.DeleteRequest{UserId: userID, MemoryId: "m-1"})
		return err
	},
	"SaveRun": func(ctx context.Context, c memoryv1.MemoryServiceClient, userID string) error {
		_, err := c.SaveRun(ctx, &memoryv1.SaveRunRequest{UserId: userID, Result: &typev1.RunResult{RunId: "run-x"}})
		return err
	},
}

// TestActingUser (issue 12.4): every RPC about a user's memories (knowledge collections
// included) and SaveRun serve a call only about the user it acts for (the agentmesh-user
// metadata): another user_id is PERMISSION_DENIED naming both, and with isolation enforced a
// call acting for nobody is UNAUTHENTICATED; without it (agentmesh dev) such a call acts for its
// user_id.
func TestActingUser(t *testing.T) {
	enforced := newClient(t, memory.Options{RequireUser: true})
	open := newClient(t, memory.Options{})
	for name, call := range memoryRPCs {
		t.Run(name, func(t *testing.T) {
			for _, c := range []memoryv1.MemoryServiceClient{enforced, open} {
				err := call(as(t.Context(), "acme/bob"), c, "acme/alice")
				grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
					`user_id "acme/alice" is not the user this call acts for ("acme/bob")`)
			}
			err := call(t.Context(), enforced, "acme/alice")
			grpctest.WantStageError(t, err, codes.Unauthenticated, typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED,
				"memory isolation is enforced", "agentmesh-user")
			if err := call(t.Context(), open, "acme/alice"); err != nil && name != "Delete" {
				t.Errorf("without isolation enforced, a call acting for nobody: %v", err)
			}
		})
	}
}

// TestActingUserFillsUserID: a request without user_id is about the user the call acts for.
func TestActingUserFillsUserID(t *testing.T) {
	c := newClient(t, memory.Options{RequireUser: true})
	alice := as(t.Context(), "acme/alice")
	stored, err := c.Store(alice, &memoryv1.StoreRequest{Content: user("Alice's note on the archive")})
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.List(alice, &memoryv1.ListRequest{})
	if err != nil || len(list.GetMemories()) != 1 || list.GetMemories()[0].GetUserId() != "acme/alice" {
		t.Fatalf("alice's list = %v, %v; want her memory, stored as hers", list, err)
	}
	hits, err := c.Search(as(t.Context(), "acme/bob"), &memoryv1.SearchRequest{Query: "archive note"})
	if err != nil || len(hits.GetHits()) != 0 {
		t.Errorf("bob's search = %v, %v; want nothing", hits, err)
	}
	_, err = c.Delete(as(t.Context(), "acme/bob"), &memoryv1.DeleteRequest{MemoryId: stored.GetMemoryId()})
	grpctest.WantStageError(t, err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND)
	if _, err := c.Delete(alice, &memoryv1.DeleteRequest{MemoryId: stored.GetMemoryId()}); err != nil {
		t.Errorf("alice deletes her memory: %v", err)
	}
}

// TestGetRunOwner: GetRun shows a run to a call acting for its owner, or for a principal whose
// roles let it read the run (an admin, its tenant's admins and approvers), and
// PERMISSION_DENIED to any other, without naming the owner.
func TestGetRunOwner(t *testing.T) {
	c := newClient(t, memory.Options{RequireUser: true})
	if _, err := c.SaveRun(as(t.Context(), "acme/alice"), &memoryv1.SaveRunRequest{Result: &typev1.RunResult{RunId: "run-1"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		allow bool
	}{
		{"owner", as(t.Context(), "acme/alice"), true},
		{"another user", as(t.Context(), "acme/bob"), false},
		{"admin", as(t.Context(), "ops/root", auth.RoleAdmin), true},
		{"tenant admin", as(t.Context(), "acme/carol", auth.RoleTenantAdmin), true},
		{"approver", as(t.Context(), "acme/dave", auth.RoleApprover), true},
		{"another tenant's admin", as(t.Context(), "umbrella/erin", auth.RoleTenantAdmin), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.GetRun(tc.ctx, &memoryv1.GetRunRequest{RunId: "run-1"})
			if !tc.allow {
				se := grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
					`may not read run "run-1"`)
				if se != nil && strings.Contains(se.Error(), "alice") {
					t.Errorf("the refusal names the owner: %q", se.Error())
				}
				return
			}
			if err != nil || resp.GetUserId() != "acme/alice" {
				t.Errorf("GetRun = %v, %v; want alice's run", resp, err)
			}
		})
	}
	t.Run("acting for nobody", func(t *testing.T) {
		_, err := c.GetRun(t.Context(), &memoryv1.GetRunRequest{RunId: "run-1"})
		grpctest.WantStageError(t, err, codes.Unauthenticated, typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED)
		_, err = c.GetRun(t.Context(), &memoryv1.GetRunRequest{RunId: "unknown"})
		grpctest.WantStageError(t, err, codes.Unauthenticated, typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED)
	})
}

// TestActingUserMalformed: metadata no mesh service sends is INVALID_ARGUMENT.
func TestActingUserMalformed(t *testing.T) {
	c := newClient(t, memory.Options{})
	for _, tc := range []struct {
		name string
		md   metadata.MD
		want string
	}{
		{"two users", metadata.Pairs(auth.UserMetadata, "acme/alice", auth.UserMetadata, "acme/bob"), "names 2 users"},
		{"empty user", metadata.Pairs(auth.UserMetadata, ""), "is empty"},
		{"unknown role", metadata.Pairs(auth.UserMetadata, "acme/alice", auth.RolesMetadata, "root"), `unknown role "root"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Search(metadata.NewOutgoingContext(t.Context(), tc.md), &memoryv1.SearchRequest{UserId: "acme/alice", Query: "q"})
			grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, tc.want)
		})
	}
}

// identityKey is the metadata a test puts in place of a client certificate's mesh identity.
const identityKey = "test-mesh-identity"

// meshIdentity is an Options.MeshIdentity that reads identityKey.
func meshIdentity(ctx context.Context) (string, bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(identityKey); len(v) == 1 {
		return v[0], true
	}
	return "", false
}

// TestMeshIdentity: when callers are identified (mTLS between the services), only mesh services
// are served, and only the orchestrator writes runs.
func TestMeshIdentity(t *testing.T) {
	c := newClient(t, memory.Options{RequireUser: true, MeshIdentity: meshIdentity})
	from := func(service string) context.Context {
		return metadata.AppendToOutgoingContext(as(t.Context(), "acme/alice"), identityKey, service)
	}
	result := &typev1.RunResult{RunId: "run-1", Transcript: chain(1, "", 1)}
	if _, err := c.SaveRun(from(memory.OrchestratorIdentity), &memoryv1.SaveRunRequest{Result: result}); err != nil {
		t.Fatalf("the orchestrator saves a run: %v", err)
	}
	if _, err := c.AppendTranscript(from(memory.OrchestratorIdentity), &memoryv1.AppendTranscriptRequest{RunId: "run-1", Entries: chain(1, "", 1)}); err != nil {
		t.Fatalf("the orchestrator appends a transcript: %v", err)
	}
	_, err := c.SaveRun(from("action"), &memoryv1.SaveRunRequest{Result: result})
	grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
		`SaveRun is served to the orchestrator only, not to "action"`)
	_, err = c.AppendTranscript(from("context"), &memoryv1.AppendTranscriptRequest{RunId: "run-1", Entries: chain(2, "h1", 1)})
	grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
		`AppendTranscript is served to the orchestrator only, not to "context"`)
	if _, err := c.Search(from("action"), &memoryv1.SearchRequest{UserId: "acme/alice", Query: "q", Collection: "knowledge"}); err != nil {
		t.Errorf("the action stage searches alice's knowledge for her: %v", err)
	}
	if _, err := c.GetRun(from(memory.OrchestratorIdentity), &memoryv1.GetRunRequest{RunId: "run-1"}); err != nil {
		t.Errorf("the orchestrator reads alice's run for her: %v", err)
	}
	// Roles are a public API caller's: believed from the orchestrator, not from another stage.
	asAdmin := func(service string) context.Context {
		return metadata.AppendToOutgoingContext(as(t.Context(), "root", auth.RoleAdmin), identityKey, service)
	}
	if _, err := c.GetRun(asAdmin(memory.OrchestratorIdentity), &memoryv1.GetRunRequest{RunId: "run-1"}); err != nil {
		t.Errorf("the orchestrator reads alice's run for an admin: %v", err)
	}
	_, err = c.GetRun(asAdmin("action"), &memoryv1.GetRunRequest{RunId: "run-1"})
	grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
		`a call acting for "root" may not read run "run-1"`)
	for name, call := range memoryRPCs {
		t.Run(name+" from no mesh service", func(t *testing.T) {
			err := call(as(t.Context(), "acme/alice"), c, "acme/alice")
			grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
				"serves the services of the mesh only")
		})
	}
	_, err = c.GetRun(as(t.Context(), "acme/alice"), &memoryv1.GetRunRequest{RunId: "run-1"})
	grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
		"serves the services of the mesh only")
}

// TestMeshCallers: when callers are identified, the memory stage serves only the mesh services
// that call it (the orchestrator; context and action for their searches): a stage that has no
// business there, the generation stage with its providers' keys say, is PERMISSION_DENIED on
// every method, whichever user it claims to act for.
func TestMeshCallers(t *testing.T) {
	c := newClient(t, memory.Options{RequireUser: true, MeshIdentity: meshIdentity})
	from := func(ctx context.Context, service string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, identityKey, service)
	}
	for _, service := range []string{memory.OrchestratorIdentity, "context", "action"} {
		if _, err := c.Search(from(as(t.Context(), "acme/alice"), service),
			&memoryv1.SearchRequest{UserId: "acme/alice", Query: "q", Collection: "knowledge"}); err != nil {
			t.Errorf("%s searches alice's knowledge for her: %v", service, err)
		}
	}
	for _, service := range []string{"generation", "intent", "planning", "observation", "recovery"} {
		for name, call := range memoryRPCs {
			t.Run(name+" from "+service, func(t *testing.T) {
				err := call(from(as(t.Context(), "acme/alice"), service), c, "acme/alice")
				grpctest.WantStageError(t, err, codes.PermissionDenied,
					typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
					`the memory stage serves orchestrator, context, action only `+
						`(memory.callers), not "`+service+`"`)
			})
		}
	}
}

// TestMeshCallersConfigured: Options.Callers (memory.callers) replaces the default callers: a
// stage it names is served, one it leaves out refused.
func TestMeshCallersConfigured(t *testing.T) {
	c := newClient(t, memory.Options{RequireUser: true, MeshIdentity: meshIdentity,
		Callers: []string{memory.OrchestratorIdentity, "research"}})
	search := func(service string) error {
		ctx := metadata.AppendToOutgoingContext(as(t.Context(), "acme/alice"), identityKey, service)
		_, err := c.Search(ctx, &memoryv1.SearchRequest{UserId: "acme/alice", Query: "q"})
		return err
	}
	if err := search("research"); err != nil {
		t.Errorf("a configured caller: %v", err)
	}
	grpctest.WantStageError(t, search("action"), codes.PermissionDenied,
		typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
		`the memory stage serves orchestrator, research only (memory.callers), not "action"`)
}

// TestAssertedUser: with callers identified and Options.UserAssertions set, a caller other
// than the orchestrator is served only for the user the orchestrator's assertion names, on
// every RPC about a user's memories, isolation enforced or not: without the assertion, with
// another user's, an expired one or one of another key, and without naming a user at all
// (its request's user_id would do), it is PERMISSION_DENIED naming the metadata. The
// orchestrator needs none. Without a verifier, every caller is believed, as before.
func TestAssertedUser(t *testing.T) {
	pub, priv := grant.GenerateKey()
	signer := grant.NewSigner(priv)
	_, otherPriv := grant.GenerateKey()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	from := func(ctx context.Context, service string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, identityKey, service)
	}
	asserted := func(user, token string) context.Context {
		return auth.OutgoingUserAssertion(as(t.Context(), user), token)
	}
	alices := signer.SignUser("acme/alice", clock.Add(time.Minute))
	for _, requireUser := range []bool{true, false} {
		c := newClient(t, memory.Options{RequireUser: requireUser, MeshIdentity: meshIdentity,
			UserAssertions: grant.NewVerifier(pub), Now: now})
		for _, rpc := range []string{"Store", "Search", "Search knowledge", "List", "Delete"} {
			call, name := memoryRPCs[rpc], fmt.Sprintf("%s, isolation enforced %v", rpc, requireUser)
			served := func(err error) bool { // Delete's memory is not there
				return err == nil || (rpc == "Delete" && status.Code(err) == codes.NotFound)
			}
			for _, service := range []string{"context", "action"} {
				err := call(from(asserted("acme/alice", alices), service), c, "acme/alice")
				if !served(err) {
					t.Errorf("%s: %s with alice's assertion: %v", name, service, err)
				}
			}
			err := call(from(as(t.Context(), "acme/alice"), memory.OrchestratorIdentity), c, "acme/alice")
			if !served(err) {
				t.Errorf("%s: the orchestrator without an assertion: %v", name, err)
			}
			bobs := signer.SignUser("acme/bob", clock.Add(time.Minute))
			foreign := grant.NewSigner(otherPriv).SignUser("acme/alice", clock.Add(time.Minute))
			for probe, ctx := range map[string]context.Context{
				"without an assertion":  as(t.Context(), "acme/alice"),
				"with bob's assertion":  asserted("acme/alice", bobs),
				"with an expired one":   asserted("acme/alice", signer.SignUser("acme/alice", clock)),
				"with another key's":    asserted("acme/alice", foreign),
				"naming no user at all": t.Context(),
			} {
				err := call(from(ctx, "action"), c, "acme/alice")
				if status.Code(err) != codes.PermissionDenied ||
					!strings.Contains(err.Error(), auth.UserAssertionMetadata) {
					t.Errorf("%s: the action stage %s: %v, want PERMISSION_DENIED naming %s",
						name, probe, err, auth.UserAssertionMetadata)
				}
			}
		}
	}
	c := newClient(t, memory.Options{RequireUser: true, MeshIdentity: meshIdentity})
	err := memoryRPCs["Search"](from(as(t.Context(), "acme/alice"), "action"), c, "acme/alice")
	if err != nil {
		t.Errorf("without a verifier, the action stage is believed about alice: %v", err)
	}
}

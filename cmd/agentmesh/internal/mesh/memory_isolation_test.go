package mesh_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// Alice's secrets in the isolation test: a memory and a knowledge document.
const (
	aliceMemory    = "Alice keeps her locker code 4711 in mind."
	aliceKnowledge = "The archive locker code is 9402."
)

// TestMemoryIsolation (issue 12.4): with API keys configured, alice's memory and knowledge
// (ingested into her user, as `agentmesh ingest --user acme/alice` does) reach her runs, through
// context assembly and knowledge_search, and never bob's: his prompt holds none of it and his
// knowledge_search finds nothing. Calling the stages directly does not get around it: the memory,
// context and action stages asked for alice's data by a call acting for bob, or for nobody,
// refuse or return nothing of hers. Her finished run, kept by the memory stage, is read by her
// and an admin (whose roles travel with the call), not by bob.
func TestMemoryIsolation(t *testing.T) {
	aliceKey, aliceHash := auth.NewKey()
	bobKey, bobHash := auth.NewKey()
	rootKey, rootHash := auth.NewKey()
	cfg := config.Default()
	cfg.Auth.APIKeys = []config.APIKey{
		{Hash: aliceHash, Tenant: "acme", User: "alice"},
		{Hash: bobHash, Tenant: "acme", User: "bob"},
		{Hash: rootHash, Tenant: "ops", User: "root", Roles: []string{auth.RoleAdmin}},
	}
	const question = "what is the locker code?"
	h := start(t, cfg, llmtest.Scenario{Name: "locker", Match: question, Turns: []llmtest.Turn{
		call("knowledge_search", `{"query": "locker code"}`), text("Here is what I found."),
	}})

	mem := memoryv1.NewMemoryServiceClient(dialStage(t, h.mesh.Addr(mesh.Memory)))
	asAlice := auth.OutgoingUser(t.Context(), "acme/alice")
	if _, err := mem.Store(asAlice, &memoryv1.StoreRequest{UserId: "acme/alice", Content: &typev1.Message{Role: typev1.Role_ROLE_USER, Content: aliceMemory}}); err != nil {
		t.Fatalf("store alice's memory: %v", err)
	}
	docs := t.TempDir()
	if err := os.WriteFile(filepath.Join(docs, "archive.md"), []byte("# Archive\n\n"+aliceKnowledge+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := memory.IngestDir(t.Context(), mem, "acme/alice", action.KnowledgeCollection, docs); err != nil {
		t.Fatalf("ingest alice's knowledge: %v", err)
	}

	// Alice's run sees both: the user travels from the orchestrator through the stages.
	alice := runAs(t, h, aliceKey, question)
	if prompt := promptOf(h.llm.Requests()[0]); !strings.Contains(prompt, aliceMemory) {
		t.Errorf("alice's first prompt lacks her memory:\n%s", prompt)
	}
	if got := toolMessage(t, alice, 0); !strings.Contains(got, aliceKnowledge) {
		t.Errorf("alice's knowledge_search returned %q, want her document", got)
	}

	// Bob asks the same: nothing of alice's reaches his prompts or his tool results.
	seen := len(h.llm.Requests())
	bob := runAs(t, h, bobKey, question)
	for i, req := range h.llm.Requests()[seen:] {
		if prompt := promptOf(req); strings.Contains(prompt, "4711") || strings.Contains(prompt, "9402") {
			t.Errorf("bob's prompt %d holds alice's data:\n%s", i+1, prompt)
		}
	}
	if got := toolMessage(t, bob, 0); got != action.EmptySearchResult {
		t.Errorf("bob's knowledge_search returned %q, want %q", got, action.EmptySearchResult)
	}

	t.Run("GetRun", func(t *testing.T) {
		for _, tc := range []struct {
			who, key string
			want     codes.Code
		}{{"alice", aliceKey, codes.OK}, {"bob", bobKey, codes.NotFound}, {"an admin", rootKey, codes.OK}} {
			ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tc.key)
			res, err := h.client.GetRun(ctx, &agentv1.GetRunRequest{RunId: alice.GetRunId()})
			if status.Code(err) != tc.want || (err == nil && res.GetRunId() != alice.GetRunId()) {
				t.Errorf("%s reads alice's finished run: %v, %v; want %s", tc.who, res.GetRunId(), err, tc.want)
			}
		}
	})

	t.Run("memory stage", func(t *testing.T) {
		asBob := auth.OutgoingUser(t.Context(), "acme/bob")
		_, err := mem.Search(asBob, &memoryv1.SearchRequest{UserId: "acme/alice", Query: "locker code"})
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), `"acme/alice"`) || !strings.Contains(err.Error(), `"acme/bob"`) {
			t.Errorf("search of alice's memories acting for bob: %v, want PERMISSION_DENIED naming both users", err)
		}
		_, err = mem.List(t.Context(), &memoryv1.ListRequest{UserId: "acme/alice", Collection: action.KnowledgeCollection})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("list of alice's knowledge acting for nobody: %v, want UNAUTHENTICATED (isolation is enforced with auth configured)", err)
		}
		_, err = mem.GetRun(asBob, &memoryv1.GetRunRequest{RunId: alice.GetRunId()})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("GetRun of alice's run acting for bob: %v, want PERMISSION_DENIED", err)
		}
	})

	t.Run("context stage", func(t *testing.T) {
		assembly := contextv1.NewContextServiceClient(dialStage(t, h.mesh.Addr(mesh.Context)))
		for name, ctx := range map[string]context.Context{"acting for bob": auth.OutgoingUser(t.Context(), "acme/bob"), "acting for nobody": t.Context()} {
			resp, err := assembly.Assemble(ctx, &contextv1.AssembleRequest{
				RunId: "probe", UserId: "acme/alice", MemoryQuery: "locker code", MaxTokens: 10000,
				History: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: question}},
			})
			if err != nil {
				t.Fatalf("%s: Assemble: %v", name, err)
			}
			for _, m := range resp.GetMessages() {
				if strings.Contains(m.GetContent(), "4711") {
					t.Errorf("%s: Assemble for user_id acme/alice put her memory in the context: %q", name, m.GetContent())
				}
			}
		}
	})

	t.Run("action stage", func(t *testing.T) {
		act := actionv1.NewActionServiceClient(dialStage(t, h.mesh.Addr(mesh.Action)))
		args, err := structpb.NewStruct(map[string]any{"query": "locker code"})
		if err != nil {
			t.Fatal(err)
		}
		for name, ctx := range map[string]context.Context{"acting for bob": auth.OutgoingUser(t.Context(), "acme/bob"), "acting for nobody": t.Context()} {
			resp, err := act.Execute(ctx, &actionv1.ExecuteRequest{
				RunId: "probe-" + strings.ReplaceAll(name, " ", "-"), CallId: "c1", ToolName: "knowledge_search", Arguments: args,
				Mode: actionv1.ExecutionMode_EXECUTION_MODE_DIRECT, UserId: "acme/alice",
			})
			if err != nil {
				t.Fatalf("%s: Execute: %v", name, err)
			}
			// The call acts for the user its metadata names (bob: his empty knowledge), or, with
			// none, for its user_id, which the memory stage refuses to believe.
			if strings.Contains(resp.GetResult(), "9402") {
				t.Errorf("%s: knowledge_search for user_id acme/alice answered %s %q: her knowledge",
					name, resp.GetStatus(), resp.GetResult())
			}
		}
	})
}

// runAs runs message through the public API authenticated with key, and wants a success.
func runAs(t *testing.T, h *harness, key, message string) *typev1.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	res, err := h.client.Run(ctx, &agentv1.RunRequest{Message: message})
	if err != nil {
		t.Fatalf("Run(%q): %v", message, err)
	}
	if !res.GetSuccess() {
		t.Fatalf("Run(%q): %s %s (%v), want a success", message, res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	return res
}

// promptOf joins the contents of a provider request's messages.
func promptOf(req llmtest.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString(string(m.Content))
		b.WriteByte('\n')
	}
	return b.String()
}

// dialStage connects to a stage of the mesh directly, as another service would.
func dialStage(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestRunIDOfAnotherUser: without checkpoints the orchestrator asks the memory stage whether a
// requested run id is taken; a run of another user, which the memory stage does not show to
// the caller, is taken all the same (ALREADY_EXISTS), and stays its owner's.
func TestRunIDOfAnotherUser(t *testing.T) {
	aliceKey, aliceHash := auth.NewKey()
	bobKey, bobHash := auth.NewKey()
	cfg := config.Default()
	cfg.Durability.Checkpoints = false
	cfg.Auth.APIKeys = []config.APIKey{{Hash: aliceHash, Tenant: "acme", User: "alice"}, {Hash: bobHash, Tenant: "acme", User: "bob"}}
	h := start(t, cfg, llmtest.Scenario{Name: "hello", Match: "hello", Turns: []llmtest.Turn{text("Hello.")}})
	as := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+key)
	}
	if _, err := h.client.Run(as(aliceKey), &agentv1.RunRequest{Message: "hello", RunId: "run-1"}); err != nil {
		t.Fatalf("alice's run: %v", err)
	}
	_, err := h.client.Run(as(bobKey), &agentv1.RunRequest{Message: "hello", RunId: "run-1"})
	if status.Code(err) != codes.AlreadyExists {
		t.Errorf("bob's run with the id of alice's: %v, want ALREADY_EXISTS", err)
	}
	mem := memoryv1.NewMemoryServiceClient(dialStage(t, h.mesh.Addr(mesh.Memory)))
	saved, err := mem.GetRun(auth.OutgoingUser(t.Context(), "acme/alice"), &memoryv1.GetRunRequest{RunId: "run-1"})
	if err != nil || saved.GetUserId() != "acme/alice" {
		t.Errorf("run-1 in memory: %v, %v; want alice's", saved.GetUserId(), err)
	}
}

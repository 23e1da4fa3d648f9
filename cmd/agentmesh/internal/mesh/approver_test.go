package mesh_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// approvalRecorder is an action stage in front of the mesh's: it passes every call on, and
// records the approval each executed call came with.
type approvalRecorder struct {
	actionv1.UnimplementedActionServiceServer
	next      atomic.Pointer[actionv1.ActionServiceClient]
	mu        sync.Mutex
	approvers map[string]string // call id → approver
}

// forward is ctx with the call's metadata (the mesh's identity of the run's user) passed on.
func forward(ctx context.Context) context.Context {
	in, _ := metadata.FromIncomingContext(ctx)
	out := metadata.MD{}
	for k, v := range in {
		if strings.HasPrefix(k, "agentmesh") || k == "traceparent" {
			out[k] = v
		}
	}
	return metadata.NewOutgoingContext(ctx, out)
}

func (a *approvalRecorder) ListTools(ctx context.Context, req *actionv1.ListToolsRequest) (*actionv1.ListToolsResponse, error) {
	return (*a.next.Load()).ListTools(forward(ctx), req)
}

func (a *approvalRecorder) Execute(ctx context.Context, req *actionv1.ExecuteRequest) (*actionv1.ExecuteResponse, error) {
	if req.GetApproval().GetApproved() {
		a.mu.Lock()
		a.approvers[req.GetCallId()] = req.GetApproval().GetApprover()
		a.mu.Unlock()
	}
	return (*a.next.Load()).Execute(forward(ctx), req)
}

// TestTheApproverIsWhoDecided (seed 003: an approval names its approver): a call a person
// approved runs, in the action stage, approved by that person, not by the run's user; here
// an approver of the user's tenant approves one call, the paused run moves to another replica
// (which resumes it from its checkpoint, with that decision in it) and an admin approves the
// other. Both ran approved by the run's user.
func TestTheApproverIsWhoDecided(t *testing.T) {
	const message = "Multiply twice."
	rec := &approvalRecorder{approvers: map[string]string{}}
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	cfg.Durability.LeaseTTLMS = 1000
	keys := withKeys(cfg)
	scenario := llmtest.Scenario{Name: message, Match: message, Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{
			{ID: "c1", Name: "calculator", Arguments: `{"expression":"6*7"}`},
			{ID: "c2", Name: "calculator", Arguments: `{"expression":"2*3"}`},
		}},
		text("42 and 6"),
	}}
	h := startRecorded(t, cfg, 2, rec, scenario)

	addrs := h.mesh.OrchestratorAddrs()
	alice, ann := keyClient(t, addrs[0], keys["alice"]), keyClient(t, addrs[0], keys["ann"])
	alice1, root1 := keyClient(t, addrs[1], keys["alice"]), keyClient(t, addrs[1], keys["root"])

	res, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
		t.Fatalf("run: %v %v, want it paused for approval", res.GetOutcome(), err)
	}
	watch, err := alice.WatchRun(t.Context(), &agentv1.WatchRunRequest{RunId: res.GetRunId()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ann.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
		t.Fatalf("ann approves c1: %v", err)
	}
	for { // the run took the decision, and checkpoints it as it goes on waiting
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("watching: %v", err)
		}
		if ev.GetApprovalResolved().GetCallId() == "c1" {
			break
		}
	}
	h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0) // hands the paused run off
	if !eventually(t, 30*time.Second, func() bool {
		_, err := root1.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c2",
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
		return err == nil
	}) {
		t.Fatal("root could not approve c2 on the other replica")
	}
	final := h.followAs(t, alice1, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v)", final.GetOutcome(), final.GetExitReason(), final.GetError())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.approvers["c1"] != "acme/ann" || rec.approvers["c2"] != "root" {
		t.Errorf("the action stage ran c1 approved by %q and c2 by %q; want acme/ann and root (the run is acme/alice's)",
			rec.approvers["c1"], rec.approvers["c2"])
	}
}

// TestTheApproverIsWhoDecidedWithoutCheckpoints: with durability.checkpoints off a decision
// reaches the run in the replica's memory, not through the run store; the call an approver
// of the user's tenant approved runs approved by that approver there too, not by the run's
// user.
func TestTheApproverIsWhoDecidedWithoutCheckpoints(t *testing.T) {
	const message = "Multiply once."
	rec := &approvalRecorder{approvers: map[string]string{}}
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	cfg.Durability.Checkpoints = false
	keys := withKeys(cfg)
	scenario := llmtest.Scenario{Name: message, Match: message, Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
		text("42"),
	}}
	h := startRecorded(t, cfg, 1, rec, scenario)
	addr := h.mesh.OrchestratorAddrs()[0]
	alice, ann := keyClient(t, addr, keys["alice"]), keyClient(t, addr, keys["ann"])

	res, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil || res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_APPROVAL {
		t.Fatalf("run: %v %v, want it paused for approval", res.GetOutcome(), err)
	}
	if _, err := ann.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1",
		Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
		t.Fatalf("ann approves c1: %v", err)
	}
	final := h.followAs(t, alice, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v)", final.GetOutcome(), final.GetExitReason(), final.GetError())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.approvers["c1"]; got != "acme/ann" {
		t.Errorf("the action stage ran c1 approved by %q; want acme/ann (the run is acme/alice's)", got)
	}
}

// startRecorded starts n orchestrator replicas whose action stage is rec, in front of the
// mesh's own.
func startRecorded(t *testing.T, cfg *config.Config, n int, rec *approvalRecorder, scenarios ...llmtest.Scenario) *harness {
	t.Helper()
	h := startOptions(t, cfg, n, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{mesh.Action: serveStage(t, mesh.Action, func(g *grpc.Server) {
			actionv1.RegisterActionServiceServer(g, rec)
		})}
	}, scenarios...)
	conn, err := grpc.NewClient(h.mesh.Addr(mesh.Action), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	next := actionv1.NewActionServiceClient(conn)
	rec.next.Store(&next)
	return h
}

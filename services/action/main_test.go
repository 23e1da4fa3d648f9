package action_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTool is a test tool that counts its executions.
type fakeTool struct {
	def   *typev1.Tool
	fn    func(ctx context.Context, call action.Call) (string, error)
	calls atomic.Int32
}

// newFakeTool returns a tool named name, accepting any object, that runs fn.
func newFakeTool(name string, fn func(ctx context.Context, call action.Call) (string, error)) *fakeTool {
	return &fakeTool{def: &typev1.Tool{Name: name, Description: "test tool " + name}, fn: fn}
}

func (f *fakeTool) Definition() *typev1.Tool { return f.def }

func (f *fakeTool) Call(ctx context.Context, call action.Call) (string, error) {
	f.calls.Add(1)
	return f.fn(ctx, call)
}

// returns is a tool body answering text.
func returns(text string) func(context.Context, action.Call) (string, error) {
	return func(context.Context, action.Call) (string, error) { return text, nil }
}

// testSigner and testVerifier are the approval grant keys of these tests: serve gives every
// service the verifier, and approved signs grants with the signer, as the orchestrator does.
var testSigner, testVerifier = func() (*grant.Signer, *grant.Verifier) {
	pub, priv := grant.GenerateKey()
	return grant.NewSigner(priv), grant.NewVerifier(pub)
}()

// approved returns the approval of req by ops, with a grant for exactly this call.
func approved(t *testing.T, req *actionv1.ExecuteRequest) *actionv1.Approval {
	t.Helper()
	g := signed(t, testSigner, req, "ops", time.Hour)
	return &actionv1.Approval{Approved: true, Approver: "ops", Grant: g}
}

// signed is signer's grant of req approved by approver, valid for the next ttl.
func signed(t *testing.T, signer *grant.Signer, req *actionv1.ExecuteRequest, approver string,
	ttl time.Duration) *actionv1.ApprovalGrant {
	t.Helper()
	g, err := signer.Sign(grant.Call{RunID: req.GetRunId(), CallID: req.GetCallId(), Tool: req.GetToolName(),
		Arguments: req.GetArguments(), Approver: approver, User: req.GetUserId()}, time.Now().Add(ttl))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// serve starts the service with opts over gRPC; logs are discarded unless opts has a logger.
func serve(t *testing.T, opts action.Options) actionv1.ActionServiceClient {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Grants == nil {
		opts.Grants = testVerifier
	}
	svc, err := action.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return actionv1.NewActionServiceClient(grpctest.Serve(t, svc.Register))
}

// args builds an arguments Struct.
func args(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatalf("arguments %v: %v", m, err)
	}
	return s
}

// testRunID is the run id of the test's calls: its name, made a run id (a subtest's name has
// a '/', which a run id may not).
func testRunID(t *testing.T) string {
	return "run-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, t.Name())
}

// callSeq makes distinct call ids.
var callSeq atomic.Int64

// request returns an ExecuteRequest for tool with a fresh call id.
func request(t *testing.T, tool string, arguments map[string]any) *actionv1.ExecuteRequest {
	t.Helper()
	return &actionv1.ExecuteRequest{
		RunId:     testRunID(t),
		CallId:    fmt.Sprintf("call-%d", callSeq.Add(1)),
		ToolName:  tool,
		Arguments: args(t, arguments),
		UserId:    "user-1",
	}
}

// serveServer serves an ActionServiceServer over gRPC.
func serveServer(t *testing.T, srv actionv1.ActionServiceServer) *grpc.ClientConn {
	t.Helper()
	return grpctest.Serve(t, func(g grpc.ServiceRegistrar) { actionv1.RegisterActionServiceServer(g, srv) })
}

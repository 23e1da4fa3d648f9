package action_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	"github.com/agentmesh/agentmesh/services/action/rest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestToolsAreToldWhoApprovedACall: a call of a tool that requires approval tells the tool who
// approved it, as its grant signs it, beside the user it acts for: a Go tool in Call.ApprovedBy,
// an MCP tool in its tools/call request's _meta (mcp.ApproverMetaKey), a REST tool in the
// X-Agentmesh-Approver header; a tool that needs no approval is told no approver. The approver
// never reached the tool, which saw only the run's user.
func TestToolsAreToldWhoApprovedACall(t *testing.T) {
	const absent = "(no approver)"
	srv := sdk.NewServer(&sdk.Implementation{Name: "bank", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "approver", Description: "Says who approved the call.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
			who, ok := req.Params.GetMeta()[mcp.ApproverMetaKey].(string)
			if !ok {
				who = absent
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: who}}}, nil, nil
		})
	mcpURL, _ := mcptest.ServeHTTP(t, srv)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch who := r.Header.Values(rest.ApproverHeader); len(who) {
		case 0:
			_, _ = io.WriteString(w, absent)
		case 1:
			_, _ = io.WriteString(w, who[0])
		default:
			http.Error(w, "more than one approver header", http.StatusBadRequest)
		}
	}))
	t.Cleanup(api.Close)
	goTool := func(name string) *fakeTool {
		return newFakeTool(name, func(_ context.Context, call action.Call) (string, error) {
			if call.ApprovedBy == "" {
				return absent, nil
			}
			return call.ApprovedBy, nil
		})
	}

	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"bank": {URL: mcpURL}}
	cfg.RestTools = map[string]config.RestTool{"approver": {URL: api.URL + "/approver"},
		"approver_free": {URL: api.URL + "/approver"}}
	cfg.Tools.RequireApproval = []string{"bank__approver", "approver", "go_approver"}
	client := serveConfig(t, cfg, goTool("go_approver"), goTool("go_approver_free"))

	for _, tc := range []struct{ tool, want string }{
		{"bank__approver", "ops"}, {"approver", "ops"}, {"go_approver", "ops"},
		{"approver_free", absent}, {"go_approver_free", absent},
	} {
		req := request(t, tc.tool, nil)
		req.Approval = approved(t, req) // by ops
		resp, err := client.Execute(t.Context(), req)
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != tc.want {
			t.Errorf("%s: the tool was told it was approved by %q (%v), want %q",
				tc.tool, resp.GetResult(), resp, tc.want)
		}
	}
}

// TestAnAlteredApproverIsRefused: the approver a request names must be the one its grant signs,
// and the grant's own cannot be changed after signing: either altered is PERMISSION_DENIED,
// and the tool does not run. An approval naming anyone was taken, and the tool told so.
func TestAnAlteredApproverIsRefused(t *testing.T) {
	tool := newFakeTool("delete_note", returns("deleted"))
	client := serve(t, action.Options{Tools: []action.Tool{tool}})

	named := request(t, "delete_note", map[string]any{"id": "n1"})
	named.Approval = approved(t, named)
	named.Approval.Approver = "root"

	signed := request(t, "delete_note", map[string]any{"id": "n1"})
	signed.Approval = approved(t, signed)
	signed.Approval.Grant = proto.CloneOf(signed.Approval.Grant)
	signed.Approval.Grant.Approver = "root"
	signed.Approval.Approver = "root"

	for name, tc := range map[string]struct {
		req  *actionv1.ExecuteRequest
		want string
	}{
		"the request's approver": {named, `approved by "ops", not "root"`},
		"the grant's approver":   {signed, "the signature does not verify"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := client.Execute(t.Context(), tc.req)
			grpctest.WantStageError(t, err, codes.PermissionDenied,
				typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, tc.want)
		})
	}
	if n := tool.calls.Load(); n != 0 {
		t.Errorf("a call with an altered approver ran the tool %d times", n)
	}
}

// TestAGrantOfAnOlderOrchestratorIsTaken: during a rolling upgrade an orchestrator from before
// grants signed the approver still signs grants without one; the action stage takes them (the
// approval was refused, and every approved call failed, until the last orchestrator moved on),
// and tells the tool no approver, since none is signed, whatever the request names.
func TestAGrantOfAnOlderOrchestratorIsTaken(t *testing.T) {
	tool := newFakeTool("delete_note", func(_ context.Context, call action.Call) (string, error) {
		return "approved by " + call.ApprovedBy + ".", nil
	})
	client := serve(t, action.Options{Tools: []action.Tool{tool}})
	req := request(t, "delete_note", map[string]any{"id": "n1"})
	req.Approval = &actionv1.Approval{Approved: true, Approver: "ops",
		Grant: signed(t, testSigner, req, "", time.Hour)}
	resp, err := client.Execute(t.Context(), req)
	if err != nil {
		t.Fatalf("a grant without an approver: %v", err)
	}
	if got := resp.GetResult(); resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS ||
		got != "approved by ." {
		t.Errorf("the tool answered %q (%v), want it told no approver", got, resp.GetStatus())
	}
}

// TestAGrantActsForTheUserItSigns: a grant signs the user the approved call acts for, so that
// it cannot be replayed for another user's call with the same run and call ids, whether the
// request names the other user in its user_id or, as the orchestrator does, in its metadata:
// either is PERMISSION_DENIED naming both users, and the tool does not run. The call of the
// user the grant signs runs.
func TestAGrantActsForTheUserItSigns(t *testing.T) {
	tool := newFakeTool("delete_note", func(_ context.Context, call action.Call) (string, error) {
		return "deleted for " + call.UserID, nil
	})
	client := serve(t, action.Options{Tools: []action.Tool{tool}})

	alice := request(t, "delete_note", map[string]any{"id": "n1"})
	alice.UserId = "acme/alice"
	alice.Approval = approved(t, alice)

	inField := proto.CloneOf(alice)
	inField.UserId = "acme/bob"
	inMetadata := proto.CloneOf(alice)
	inMetadata.UserId = ""
	for name, tc := range map[string]struct {
		ctx context.Context
		req *actionv1.ExecuteRequest
	}{
		"user_id":  {t.Context(), inField},
		"metadata": {auth.OutgoingUser(t.Context(), "acme/bob"), inMetadata},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := client.Execute(tc.ctx, tc.req)
			grpctest.WantStageError(t, err, codes.PermissionDenied,
				typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
				`granted for user "acme/alice", not "acme/bob"`)
		})
	}
	if n := tool.calls.Load(); n != 0 {
		t.Fatalf("a grant replayed for another user ran the tool %d times", n)
	}
	resp, err := client.Execute(t.Context(), alice)
	if err != nil {
		t.Fatalf("the call the grant signs: %v", err)
	}
	if got := resp.GetResult(); got != "deleted for acme/alice" {
		t.Errorf("the tool answered %q, want it run for acme/alice", got)
	}
}

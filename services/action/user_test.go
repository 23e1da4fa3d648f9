package action_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action/internal/mcptest"
	"github.com/agentmesh/agentmesh/services/action/mcp"
	"github.com/agentmesh/agentmesh/services/action/rest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
)

// TestToolsAreToldTheUserACallActsFor: an MCP tool gets the user a call acts for in its
// tools/call request's _meta, and a REST tool in a request header, so that a server serving many
// users need not trust a user the model fills into the arguments (seed 004:
// execute(tool_name, parameters, user_id)); a call that acts for no known user sends neither.
// Neither was sent: the user was known to the action stage but never reached the tool.
func TestToolsAreToldTheUserACallActsFor(t *testing.T) {
	const absent = "(no user)"
	srv := sdk.NewServer(&sdk.Implementation{Name: "people", Version: "1.0.0"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "whoami", Description: "Says who the call acts for.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
			user, ok := req.Params.GetMeta()[mcp.UserMetaKey].(string)
			if !ok {
				user = absent
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: user}}}, nil, nil
		})
	mcpURL, _ := mcptest.ServeHTTP(t, srv)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		users := r.Header.Values(rest.UserHeader)
		switch len(users) {
		case 0:
			_, _ = io.WriteString(w, absent)
		case 1:
			_, _ = io.WriteString(w, users[0])
		default:
			http.Error(w, "more than one user header", http.StatusBadRequest)
		}
	}))
	t.Cleanup(api.Close)

	cfg := config.Default()
	cfg.MCPServers = map[string]config.MCPServer{"people": {URL: mcpURL}}
	cfg.RestTools = map[string]config.RestTool{"whoami": {URL: api.URL + "/whoami"}}
	client := serveConfig(t, cfg)

	for _, tool := range []string{"people__whoami", "whoami"} {
		for _, user := range []string{"acme/alice", ""} {
			req := request(t, tool, map[string]any{"user_id": "mallory"}) // the model's say
			req.UserId = user
			resp, err := client.Execute(t.Context(), req)
			if err != nil {
				t.Fatalf("%s for %q: %v", tool, user, err)
			}
			want := user
			if want == "" {
				want = absent
			}
			if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != want {
				t.Errorf("%s acting for %q: the tool was told %q (%v), want %q", tool, user, resp.GetResult(), resp, want)
			}
		}
	}
}

// TestAUserIDWithAControlCharacterIsRefused: the user a call acts for goes to a REST tool in a
// header, which holds no control character, and to the memory stage, which refuses one. The
// action stage took such a user_id: the call was recorded as run and failed with Go's "invalid
// header field value", an execution error the call id kept for good. It is INVALID_ARGUMENT
// naming user_id and the rule, as the orchestrator's own check of a run's user, and nothing
// runs.
func TestAUserIDWithAControlCharacterIsRefused(t *testing.T) {
	var requests atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(api.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"whoami": {URL: api.URL + "/whoami"}}
	client := serveConfig(t, cfg)
	for _, user := range []string{"acme/alice\nX-Admin: yes", "alice\x00", "alice\x7f", "alice\u009b31m"} {
		req := request(t, "whoami", nil)
		req.UserId = user
		_, err := client.Execute(t.Context(), req)
		grpctest.WantStageError(t, err, codes.InvalidArgument,
			typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT,
			"user_id: must not contain a control character")
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the tool's API got %d requests", n)
	}
}

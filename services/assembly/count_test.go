package assembly_test

import (
	"testing"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/assembly"
	"google.golang.org/grpc/codes"
)

// TestToolCallIDsCount: the provider receives a call's id in the assistant message and again
// as the result's tool_call_id, and the tool's name with the result; they cost tokens, and a
// budget that left them out let a request over the window through.
func TestToolCallIDsCount(t *testing.T) {
	c := newClient(t, assembly.Options{})
	const id = "call_Rk3VbNqW8xZp2TmYc6HsLd9F" // an OpenAI call id, 29 bytes
	history := []*typev1.Message{
		{Role: typev1.Role_ROLE_ASSISTANT,
			ToolCalls: []*typev1.ToolCall{{Id: id, Name: "search", RawArguments: `{}`}}},
		{Role: typev1.Role_ROLE_TOOL, ToolCallId: id, Name: "search", Content: "nothing found"},
	}
	// The call with its result is the newest unit: the minimum context.
	need := 2*tokens.MessageOverhead + tokens.Estimate("search") + tokens.Estimate("{}") +
		2*tokens.Estimate(id) + tokens.Estimate("search") + tokens.Estimate("nothing found")
	req := &contextv1.AssembleRequest{History: history, MaxTokens: need}
	resp, err := c.Assemble(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetTokenCount(); got != need {
		t.Errorf("token_count = %d, want %d: the call's id twice and the result's tool name", got, need)
	}
	req.MaxTokens = need - 1
	_, err = c.Assemble(t.Context(), req)
	grpctest.WantStageError(t, err, codes.ResourceExhausted,
		typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW, "cannot fit the minimum context")
}

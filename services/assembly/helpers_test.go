package assembly_test

import (
	"strings"
	"testing"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/stagetest"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/services/assembly"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newClient(t *testing.T, opts assembly.Options) contextv1.ContextServiceClient {
	t.Helper()
	return contextv1.NewContextServiceClient(grpctest.Serve(t, assembly.New(opts).Register))
}

// text returns content costing exactly n tokens on top of the message overhead.
func text(label string, n int) string {
	return label + strings.Repeat(".", 4*n-len(label))
}

func sys(label string, n int) *typev1.Message {
	return &typev1.Message{Role: typev1.Role_ROLE_SYSTEM, Content: text(label, n)}
}

func usr(label string, n int) *typev1.Message {
	return &typev1.Message{Role: typev1.Role_ROLE_USER, Content: text(label, n)}
}

func asst(label string, n int) *typev1.Message {
	return &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: text(label, n)}
}

// call is an assistant message requesting the given tool call ids.
func call(label string, ids ...string) *typev1.Message {
	m := &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: label}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, &typev1.ToolCall{Id: id, Name: "search", RawArguments: `{"q":"x"}`})
	}
	return m
}

func result(id string, n int) *typev1.Message {
	return &typev1.Message{Role: typev1.Role_ROLE_TOOL, ToolCallId: id, Name: "search", Content: text("result-"+id, n)}
}

// labels returns the first word of every message's content, to compare outputs briefly.
func labels(msgs []*typev1.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = strings.TrimRight(m.GetContent(), ".")
	}
	return out
}

// checkInvariants asserts what must hold for every assembly: within budget, token_count
// exact, and no tool result without its call or call without its results.
func checkInvariants(t *testing.T, resp *contextv1.AssembleResponse, maxTokens int64) {
	t.Helper()
	msgs := resp.GetMessages()
	if resp.GetTokenCount() != tokens.Messages(msgs) {
		t.Errorf("token_count = %d, messages cost %d", resp.GetTokenCount(), tokens.Messages(msgs))
	}
	if resp.GetTokenCount() > maxTokens {
		t.Errorf("token_count %d exceeds max_tokens %d", resp.GetTokenCount(), maxTokens)
	}
	if err := stagetest.CheckToolPairs(msgs); err != nil {
		t.Error(err)
	}
}

package stagetest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc/codes"
)

var contextCases = []testCase{
	{"fits-budget", "a short conversation is assembled whole within max_tokens, system message and newest message kept",
		func(ctx context.Context, k *kit) error {
			history := []*typev1.Message{
				{Role: typev1.Role_ROLE_SYSTEM, Content: "You are a helpful assistant."},
				{Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7?"},
			}
			resp, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
				History: history, MaxTokens: 1000, RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			return checkAssembled(resp, history, 1000)
		}},
	{"recency-within-budget", "a long conversation over max_tokens keeps the system and newest messages, drops older ones, keeps order and fits max_tokens",
		func(ctx context.Context, k *kit) error {
			history := []*typev1.Message{{Role: typev1.Role_ROLE_SYSTEM, Content: "You are a helpful assistant."}}
			for i := range 30 {
				role := typev1.Role_ROLE_USER
				if i%2 == 1 {
					role = typev1.Role_ROLE_ASSISTANT
				}
				history = append(history, &typev1.Message{Role: role, Content: fmt.Sprintf("message %d: %s", i, filler(120))})
			}
			resp, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
				History: history, MaxTokens: 800, RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			if err := checkAssembled(resp, history, 800); err != nil {
				return err
			}
			if kept := keptHistory(resp, history); len(kept) == len(history) {
				return fmt.Errorf("every message was kept although the history is far over max_tokens")
			}
			return nil
		}},
	{"overflow", "a system message far over max_tokens is CONTEXT_OVERFLOW (RESOURCE_EXHAUSTED)",
		func(ctx context.Context, k *kit) error {
			_, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
				History: []*typev1.Message{
					{Role: typev1.Role_ROLE_SYSTEM, Content: filler(3000)},
					{Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7?"},
				}, MaxTokens: 50, RunId: k.id("run")})
			return wantFailure(err, codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW)
		}},
	{"memory-is-optional", "a memory query is answered (memory_unavailable reports a memory outage), never failed for memory",
		func(ctx context.Context, k *kit) error {
			history := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "What is my favourite colour?"}}
			resp, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
				History: history, MaxTokens: 2000, UserId: k.id("user"), MemoryQuery: "favourite colour", MemoryLimit: 3, RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			return checkAssembled(resp, history, 2000)
		}},
	{"zero-max-tokens", "max_tokens 0 is INVALID_ARGUMENT naming max_tokens",
		func(ctx context.Context, k *kit) error {
			_, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
				History: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "hi"}}})
			return wantInvalid(err, "max_tokens")
		}},
	{"empty-history", "an empty history is INVALID_ARGUMENT naming history",
		func(ctx context.Context, k *kit) error {
			_, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{MaxTokens: 1000})
			return wantInvalid(err, "history")
		}},
	{"message-without-role", "a history message without a role is INVALID_ARGUMENT naming history",
		func(ctx context.Context, k *kit) error {
			_, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
				History: []*typev1.Message{{Content: "hi"}}, MaxTokens: 1000})
			return wantInvalid(err, "history")
		}},
}

// checkAssembled returns how an assembly of history breaks the context contract: the context
// fits maxTokens, keeps every system message of the history and its newest message, and keeps
// the history's order.
func checkAssembled(resp *contextv1.AssembleResponse, history []*typev1.Message, maxTokens int64) error {
	var p problems
	if n := resp.GetTokenCount(); n > maxTokens || n <= 0 {
		p.addf("token_count %d, want between 1 and max_tokens %d", n, maxTokens)
	}
	kept := keptHistory(resp, history)
	for i, m := range history {
		if m.GetRole() == typev1.Role_ROLE_SYSTEM && !slices.Contains(kept, i) {
			p.addf("the system message history[%d] was dropped", i)
		}
	}
	if newest := len(history) - 1; !slices.Contains(kept, newest) {
		p.addf("the newest message history[%d] was dropped", newest)
	}
	if !slices.IsSorted(kept) {
		p.addf("history messages out of order: kept history indices %v", kept)
	}
	return p.err()
}

// keptHistory returns, in the order assembled, the indices of the history messages the
// assembled context holds.
func keptHistory(resp *contextv1.AssembleResponse, history []*typev1.Message) []int {
	var kept []int
	for _, m := range resp.GetMessages() {
		for i, h := range history {
			if h.GetRole() == m.GetRole() && h.GetContent() == m.GetContent() && !slices.Contains(kept, i) {
				kept = append(kept, i)
				break
			}
		}
	}
	return kept
}

// filler is n distinct words.
func filler(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = fmt.Sprintf("word%d", i)
	}
	return strings.Join(words, " ")
}

package stagetest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/toolname"
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
			if n := resp.GetDroppedMessages(); n != 0 {
				return fmt.Errorf("dropped_messages %d for a conversation that fits: the run would end MAX_CONTEXT_REACHED", n)
			}
			return checkAssembled(resp, history, 1000)
		}},
	{"recency-within-budget", "a long conversation over max_tokens keeps the system and newest messages, drops older ones (counted in dropped_messages), keeps order and fits max_tokens",
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
			kept := keptHistory(resp, history)
			if len(kept) == len(history) {
				return fmt.Errorf("every message was kept although the history is far over max_tokens")
			}
			// The orchestrator ends a run whose context leaves messages of the conversation
			// out (seed 002 §6: no answer from a truncated history): it must be told.
			if left := len(history) - len(kept); int(resp.GetDroppedMessages()) != left {
				return fmt.Errorf("dropped_messages %d, but %d messages of the history were left out: "+
					"a run would go on without them", resp.GetDroppedMessages(), left)
			}
			return nil
		}},
	{"current-step-shown", "with room to spare, the current step's description is in the assembled context, with the history kept",
		func(ctx context.Context, k *kit) error {
			history := []*typev1.Message{
				{Role: typev1.Role_ROLE_SYSTEM, Content: "You are a helpful assistant."},
				{Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7, and what time is it?"},
			}
			step := &typev1.Step{Id: "step-1", Description: "Multiply six by seven with the calculator", ToolName: "calculator"}
			resp, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
				History: history, MaxTokens: 2000, RunId: k.id("run"), CurrentStep: step,
				Plan: []*typev1.StepProgress{{Step: step, State: typev1.StepState_STEP_STATE_PENDING}}})
			if err != nil {
				return wantOK(err)
			}
			if err := checkAssembled(resp, history, 2000); err != nil {
				return err
			}
			if !slices.ContainsFunc(resp.GetMessages(), func(m *typev1.Message) bool { return strings.Contains(m.GetContent(), step.GetDescription()) }) {
				return fmt.Errorf("no message holds the current step's description %q: the model would not know which step of the plan it works on", step.GetDescription())
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
	{"tool-pairs", "an assistant message's calls and their results are kept or dropped together, and a call without its result is never kept (providers refuse it)",
		func(ctx context.Context, k *kit) error {
			call := func(text string, ids ...string) *typev1.Message {
				m := &typev1.Message{Role: typev1.Role_ROLE_ASSISTANT, Content: text}
				for _, id := range ids {
					m.ToolCalls = append(m.ToolCalls, &typev1.ToolCall{Id: id, Name: "search", RawArguments: `{"q":"x"}`})
				}
				return m
			}
			result := func(id string) *typev1.Message {
				return &typev1.Message{Role: typev1.Role_ROLE_TOOL, ToolCallId: id, Name: "search", Content: "result " + id + ": " + filler(60)}
			}
			history := []*typev1.Message{
				{Role: typev1.Role_ROLE_SYSTEM, Content: "You are a helpful assistant."},
				{Role: typev1.Role_ROLE_USER, Content: "first question: " + filler(60)},
				call("Searching twice.", "c1", "c2"), result("c1"), result("c2"),
				call("Searching again.", "c3", "c4"), result("c3"), // c4 has no result
				{Role: typev1.Role_ROLE_USER, Content: "last question"},
			}
			for _, budget := range []int64{10_000, 400, 250} {
				resp, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
					History: history, MaxTokens: budget, RunId: k.id("run")})
				if err != nil {
					return wantOK(err)
				}
				if err := checkAssembled(resp, history, budget); err != nil {
					return fmt.Errorf("max_tokens %d: %w", budget, err)
				}
			}
			return nil
		}},
	{"guard", "with a context window the guard is reported: limit context_window - buffer - max_output, projected ctx + pending + new + schema, FORCE_FINAL over the limit and OK up to it (seed 000 §2)",
		func(ctx context.Context, k *kit) error {
			history := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7?"}}
			for _, tc := range []struct {
				newTokens int64
				verdict   typev1.GuardVerdict
			}{{100, typev1.GuardVerdict_GUARD_VERDICT_OK}, {1100, typev1.GuardVerdict_GUARD_VERDICT_OK}, {1101, typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL}} {
				counters := &typev1.GuardCounters{Ctx: 300, Pending: 50, New: tc.newTokens, Schema: 50}
				resp, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
					History: history, MaxTokens: 1000, RunId: k.id("run"), Counters: counters,
					ContextWindow: 2000, ContextWindowBufferTokens: 200, MaxOutputTokens: 300})
				if err != nil {
					return wantOK(err)
				}
				g, want := resp.GetGuard(), 300+50+tc.newTokens+50
				switch {
				case g == nil:
					return fmt.Errorf("no guard, though context_window was set")
				case g.GetLimit() != 2000-200-300 || g.GetProjected() != want:
					return fmt.Errorf("guard limit %d, projected %d; want %d (context_window - buffer - max_output) and %d (ctx + pending + new + schema)",
						g.GetLimit(), g.GetProjected(), 2000-200-300, want)
				case g.GetVerdict() != tc.verdict:
					return fmt.Errorf("guard verdict %s for projected %d and limit %d, want %s", g.GetVerdict(), want, g.GetLimit(), tc.verdict)
				}
				if err := checkAssembled(resp, history, 1000); err != nil {
					return err
				}
			}
			return nil
		}},
	{"guard-ratio", "with force_synthesis_at_ratio 0.5 of a window of 2000, a projection of 1100 (within the limit of 1500) is FORCE_FINAL, one of 500 OK",
		func(ctx context.Context, k *kit) error {
			history := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7?"}}
			for _, tc := range []struct {
				newTokens int64
				verdict   typev1.GuardVerdict
			}{{100, typev1.GuardVerdict_GUARD_VERDICT_OK}, {700, typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL}} {
				resp, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
					History: history, MaxTokens: 1000, RunId: k.id("run"),
					Counters:      &typev1.GuardCounters{Ctx: 300, Pending: 50, New: tc.newTokens, Schema: 50},
					ContextWindow: 2000, ContextWindowBufferTokens: 200, MaxOutputTokens: 300, ForceSynthesisAtRatio: 0.5})
				if err != nil {
					return wantOK(err)
				}
				switch g := resp.GetGuard(); {
				case g == nil:
					return fmt.Errorf("no guard, though context_window was set")
				case g.GetVerdict() != tc.verdict:
					return fmt.Errorf("guard verdict %s for projected %d (limit %d) with force_synthesis_at_ratio 0.5 of 2000, want %s",
						g.GetVerdict(), g.GetProjected(), g.GetLimit(), tc.verdict)
				}
			}
			return nil
		}},
	{"guard-counts-tools", "counters without schema: the guard counts the offered tools' schemas itself, for the tools of each request (FORCE_FINAL with a tool whose schema holds 1500 words offered, OK with the calculator alone)",
		func(ctx context.Context, k *kit) error {
			history := []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "What is 6 times 7?"}}
			large := &typev1.Tool{Name: "encyclopedia", Description: "Looks a topic up.", InputSchema: mustStruct(map[string]any{
				"type": "object", "properties": map[string]any{"topic": map[string]any{"type": "string", "description": filler(1500)}}})}
			for _, tc := range []struct {
				tools   []*typev1.Tool
				verdict typev1.GuardVerdict
			}{{[]*typev1.Tool{calculatorTool, large}, typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL}, {[]*typev1.Tool{calculatorTool}, typev1.GuardVerdict_GUARD_VERDICT_OK}} {
				resp, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
					History: history, MaxTokens: 1000, RunId: k.id("run"), Tools: tc.tools,
					Counters:      &typev1.GuardCounters{Ctx: 300, Pending: 50},
					ContextWindow: 2000, ContextWindowBufferTokens: 200, MaxOutputTokens: 300})
				if err != nil {
					return wantOK(err)
				}
				g, names := resp.GetGuard(), toolname.Of(tc.tools)
				switch {
				case g == nil:
					return fmt.Errorf("no guard, though context_window was set")
				case g.GetCounters().GetSchema() <= 0 || resp.GetSchemaTokens() <= 0:
					return fmt.Errorf("tools %v offered: guard schema %d, schema_tokens %d; want the tools' schemas counted",
						names, g.GetCounters().GetSchema(), resp.GetSchemaTokens())
				case g.GetVerdict() != tc.verdict:
					return fmt.Errorf("tools %v offered: guard verdict %s (projected %d, schema %d, limit %d), want %s",
						names, g.GetVerdict(), g.GetProjected(), g.GetCounters().GetSchema(), g.GetLimit(), tc.verdict)
				}
			}
			return nil
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
	{"model-over-limit", "a model of 257 bytes is INVALID_ARGUMENT naming model",
		func(ctx context.Context, k *kit) error {
			_, err := contextv1.NewContextServiceClient(k.conn).Assemble(ctx, &contextv1.AssembleRequest{
				History: []*typev1.Message{{Role: typev1.Role_ROLE_USER, Content: "hi"}}, MaxTokens: 1000, Model: strings.Repeat("m", 257)})
			return wantInvalid(err, "model")
		}},
}

// checkAssembled returns how an assembly of history breaks the context contract: the context
// fits maxTokens (its token_count says so, and its messages hold no more than two words a
// token, which any tokenizer's count of them keeps), keeps every system message of the history and its newest message, keeps
// the history's order, and holds no call without its result nor a result without its call.
func checkAssembled(resp *contextv1.AssembleResponse, history []*typev1.Message, maxTokens int64) error {
	var p problems
	if err := CheckToolPairs(resp.GetMessages()); err != nil {
		p.addf("%v", err)
	}
	if n := resp.GetTokenCount(); n > maxTokens || n <= 0 {
		p.addf("token_count %d, want between 1 and max_tokens %d", n, maxTokens)
	}
	if words := wordCount(resp.GetMessages()); words > 2*maxTokens {
		p.addf("the messages hold %d words, more than twice max_tokens %d: they do not fit it, whatever token_count (%d) says", words, maxTokens, resp.GetTokenCount())
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

// CheckToolPairs returns what in msgs, a model request's messages, providers refuse (HTTP
// 400): each call that the tool messages right after its assistant message do not answer,
// and each tool message that answers no call of the assistant message before its run of tool
// messages; nil when there is none.
func CheckToolPairs(msgs []*typev1.Message) error {
	var p problems
	for i, m := range msgs {
		switch {
		case m.GetRole() == typev1.Role_ROLE_TOOL:
			j := i - 1
			for j >= 0 && msgs[j].GetRole() == typev1.Role_ROLE_TOOL {
				j--
			}
			if j < 0 || !slices.ContainsFunc(msgs[j].GetToolCalls(), func(c *typev1.ToolCall) bool { return c.GetId() == m.GetToolCallId() }) {
				p.addf("messages[%d] is the result of %q without its call", i, m.GetToolCallId())
			}
		case len(m.GetToolCalls()) > 0:
			answered := map[string]bool{}
			for j := i + 1; j < len(msgs) && msgs[j].GetRole() == typev1.Role_ROLE_TOOL; j++ {
				answered[msgs[j].GetToolCallId()] = true
			}
			for _, c := range m.GetToolCalls() {
				if !answered[c.GetId()] {
					p.addf("messages[%d] calls %q without its result", i, c.GetId())
				}
			}
		}
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

// wordCount is the number of words of msgs' contents.
func wordCount(msgs []*typev1.Message) int64 {
	var n int64
	for _, m := range msgs {
		n += int64(len(strings.Fields(m.GetContent())))
	}
	return n
}

// filler is n distinct words.
func filler(n int) string {
	words := make([]string, n)
	for i := range words {
		words[i] = fmt.Sprintf("word%d", i)
	}
	return strings.Join(words, " ")
}

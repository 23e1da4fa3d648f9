package mesh_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// conformanceCase is one promise of the seed contracts, run through the whole mesh against
// the scripted LLM: the request's message selects the scenario.
type conformanceCase struct {
	name       string
	turns      []llmtest.Turn
	overrides  *agentv1.RunOverrides
	request    func(*agentv1.RunRequest)
	outcome    typev1.Outcome
	exit       string
	roles      string // conversation roles, initials: S U A T
	accounting string // e.g. "LLM:OK TOOL:FAILED"
	check      func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request)
}

func i32(v int32) *int32     { return &v }
func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func yes() *bool             { v := true; return &v }

func call(name, args string) llmtest.Turn {
	return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: name, Arguments: args}}}
}

func text(s string) llmtest.Turn { return llmtest.Turn{Content: s} }

func toolMessage(t *testing.T, res *typev1.RunResult, n int) string {
	t.Helper()
	var tools []string
	for _, m := range res.GetConversation() {
		if m.GetRole() == typev1.Role_ROLE_TOOL {
			tools = append(tools, m.GetContent())
		}
	}
	if n >= len(tools) {
		t.Fatalf("no tool message %d in %v", n, tools)
	}
	return tools[n]
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance is the conformance suite of issue 4: seed 001 §9's corpus, seed 000's
// guarantees of §1–§6 and seed 002's exit reasons. Each case asserts outcome, exit_reason,
// conversation and accounting; every case also checks the final report's status rule, the
// accounting fields and the transcript chain.
func TestConformance(t *testing.T) {
	answerSchema := map[string]any{
		"type": "object", "required": []any{"answer"},
		"properties": map[string]any{"answer": map[string]any{"type": "integer"}, "detail": map[string]any{"type": "object"}},
	}
	jsonRun := func(r *agentv1.RunRequest) {
		r.OutputFormat = typev1.OutputFormat_OUTPUT_FORMAT_JSON
		r.OutputSchema = mustStruct(t, answerSchema)
	}
	report := func(args string) llmtest.Turn { return call("final_report", args) }
	loop := call("current_time", `{}`)
	cases := []conformanceCase{
		// Seed 001 §9, the minimal conformance corpus.
		{name: "001/1 required tool, valid call", overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED},
			turns:   []llmtest.Turn{call("calculator", `{"expression":"6*7"}`), text("42")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK TOOL:OK LLM:OK"},
		{name: "001/2 required tool, malformed output", overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED, StrictMode: yes(), MaxFormatRetries: i32(0)},
			turns:   []llmtest.Turn{call("calculator", `{"expression": "6*7"`)},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, exit: "INVALID_TOOL_CALL", roles: "SUAT", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := toolMessage(t, res, 0); !strings.HasPrefix(got, "(tool failed: the arguments are not valid JSON") {
					t.Errorf("tool message %q", got)
				}
			}},
		// The adapter's rejection is the retry ladder's trigger (Phase 2b), whatever else is
		// wrong with the call: a call without a name, or with broken arguments to a tool the
		// run does not offer, is malformed output too.
		{name: "001/2b required tool, a call without a name", overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED, StrictMode: yes(), MaxFormatRetries: i32(0)},
			turns:   []llmtest.Turn{call("", `{}`), text("never asked")},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, exit: "INVALID_TOOL_CALL", roles: "SUAT", accounting: "LLM:OK", check: oneLLMCall},
		{name: "001/2c required tool, malformed call to an unknown tool", overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED, StrictMode: yes(), MaxFormatRetries: i32(0)},
			turns:   []llmtest.Turn{call("teleport", `{"to": `), text("never asked")},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, exit: "INVALID_TOOL_CALL", roles: "SUAT", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) {
				if got := toolMessage(t, res, 0); !strings.HasPrefix(got, `(tool failed: unknown tool "teleport"`) {
					t.Errorf("tool message %q", got)
				}
				oneLLMCall(t, res, reqs)
			}},
		{name: "001/1b required tool, only a refused call", overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED},
			turns:   []llmtest.Turn{call("calculator", `{"expr":"6*7"}`), text("I could not compute it.")},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROTOCOL_NO_TOOLS, exit: "TOOL_REQUIRED", roles: "SUATA", accounting: "LLM:OK TOOL:FAILED LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) { // issue 11.2: a refused call is not executed
				if res.GetToolCalls() != 0 {
					t.Errorf("tool_calls %d, want 0: the action stage refused the call", res.GetToolCalls())
				}
				cannedReport(orchestrator.MessageToolRequired)(t, res, reqs)
			}},
		{name: "001/1c required tool, clarification asked", overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED},
			request: func(r *agentv1.RunRequest) { r.Message = "help" },
			turns:   []llmtest.Turn{text("never asked")},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROTOCOL_NO_TOOLS, exit: "TOOL_REQUIRED", roles: "SUA", accounting: "", check: noLLMCall},
		{name: "001/3 required tool, narration only", overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED},
			turns:   []llmtest.Turn{text("I would use the calculator and get 42.")},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROTOCOL_NO_TOOLS, exit: "TOOL_REQUIRED", roles: "SUA", accounting: "LLM:OK",
			check: cannedReport(orchestrator.MessageToolRequired)}, // issue 11.3: never an empty report
		// A refused final answer is still a terminal answer without a tool: under required the
		// run ends at once (COMMIT's policy check comes before seed 000's collapse into a final
		// turn, which offers no tool and so could never meet the policy).
		{name: "001/3b required tool, json answer refused", request: jsonRun, overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED},
			turns:   []llmtest.Turn{text("The answer is 42."), text("Still 42.")},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROTOCOL_NO_TOOLS, exit: "TOOL_REQUIRED", roles: "SUA", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) {
				oneLLMCall(t, res, reqs)
				cannedReport(orchestrator.MessageToolRequired)(t, res, reqs)
			}},
		{name: "001/3c required tool, final_report refused", request: jsonRun, overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED},
			turns:   []llmtest.Turn{report(`{"report_format":"json","content_json":{"answer":"forty-two"}}`), report(`{"report_format":"json","content_json":{"answer":42}}`)},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROTOCOL_NO_TOOLS, exit: "TOOL_REQUIRED", roles: "SUAT", accounting: "LLM:OK", check: oneLLMCall},
		{name: "001/4 forbidden tool attempted", overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN},
			turns:   []llmtest.Turn{call("calculator", `{"expression":"1+1"}`)},
			outcome: typev1.Outcome_OUTCOME_FAILED_CONTRACT_VIOLATION, exit: "TOOL_POLICY_VIOLATION", roles: "SUAT", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) {
				if tools := reqs[0].ToolNames(); len(tools) != 0 {
					t.Errorf("a forbidden run offered tools %v", tools)
				}
				cannedReport(orchestrator.MessageToolPolicyViolation)(t, res, reqs)
			}},
		{name: "001/4b forbidden tool attempted in the last turn", overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN, MaxTurns: i32(1)},
			turns:   []llmtest.Turn{call("calculator", `{"expression":"1+1"}`)},
			outcome: typev1.Outcome_OUTCOME_FAILED_CONTRACT_VIOLATION, exit: "TOOL_POLICY_VIOLATION", roles: "SUAT", accounting: "LLM:OK",
			check: cannedReport(orchestrator.MessageToolPolicyViolation)}, // a violation in a final turn too, not MAX_TURNS_REACHED
		{name: "001/5 oversized tool result", overrides: &agentv1.RunOverrides{ToolResponseMaxBytes: i64(10)},
			turns:   []llmtest.Turn{call("big_lookup", `{}`), text("done")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK TOOL:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got, want := toolMessage(t, res, 0), "[TRUNCATED] Original size 100 bytes; truncated to 10 bytes.\nxxxxxxxxxx"; got != want {
					t.Errorf("tool message %q, want %q", got, want)
				}
			}},
		{name: "001/6 timeout-inducing tool", overrides: &agentv1.RunOverrides{ToolTimeoutMs: i64(200)},
			turns:   []llmtest.Turn{call("slow_lookup", `{}`), text("the lookup timed out")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK TOOL:FAILED LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := toolMessage(t, res, 0); got != "(tool failed: timeout)" {
					t.Errorf("tool message %q", got)
				}
				if e := res.GetAccounting()[1]; e.GetError() != "timeout" || e.GetCommand() != "slow_lookup" {
					t.Errorf("tool accounting %v", e)
				}
			}},

		// Seed 000 §1: turn and tool limits, retries, truncation (above), timeouts (above), repair.
		// Issue 11.3: the last turn is a final turn (tools disabled), so its call is refused, not run.
		{name: "000 max turns", overrides: &agentv1.RunOverrides{MaxTurns: i32(2)}, turns: []llmtest.Turn{loop, loop, loop},
			outcome: typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, exit: "MAX_TURNS_REACHED", roles: "SUATAT", accounting: "LLM:OK TOOL:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if r := res.GetFinalReport().GetMetadata().GetFields()["reason"].GetStringValue(); r != "max_turns_exhausted" {
					t.Errorf("metadata.reason %q", r)
				}
			}},
		{name: "000 last turn under max_turns answers", overrides: &agentv1.RunOverrides{MaxTurns: i32(2)}, turns: []llmtest.Turn{loop, text("It is noon.")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK TOOL:OK LLM:OK",
			check: func(t *testing.T, _ *typev1.RunResult, reqs []llmtest.Request) {
				if len(reqs) != 2 {
					t.Fatalf("%d LLM requests, want 2", len(reqs))
				}
				if got := reqs[1].ToolNames(); !slices.Equal(got, []string{"final_report"}) {
					t.Errorf("the last turn offered %v", got)
				}
			}},
		{name: "000 max tool calls per turn", overrides: &agentv1.RunOverrides{MaxToolCallsPerTurn: i32(2)},
			turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
				{Name: "calculator", Arguments: `{"expression":"1+1"}`}, {Name: "calculator", Arguments: `{"expression":"2+2"}`},
				{Name: "calculator", Arguments: `{"expression":"3+3"}`}}}, text("2, 4 and (dropped)")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUATTTA", accounting: "LLM:OK TOOL:OK TOOL:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := toolMessage(t, res, 2); got != "(tool failed: dropped: at most 2 tool calls may run in one turn)" {
					t.Errorf("third tool message %q", got)
				}
			}},
		{name: "000 retries cycle targets round-robin", overrides: &agentv1.RunOverrides{MaxRetries: i32(3),
			Targets: []*typev1.Target{{Provider: "scripted", Model: "gpt-a"}, {Provider: "scripted2", Model: "gpt-b"}}},
			turns:   []llmtest.Turn{{Content: "third time lucky", FailuresBeforeSuccess: 2, Failure: llmtest.FailRateLimit, RetryAfterMS: 10}},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:FAILED LLM:FAILED LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				var seq []string
				for _, a := range res.GetAccounting() {
					seq = append(seq, a.GetProvider()+"/"+a.GetModel())
				}
				if want := []string{"scripted/gpt-a", "scripted2/gpt-b", "scripted/gpt-a"}; !slices.Equal(seq, want) {
					t.Errorf("targets %v, want %v", seq, want)
				}
			}},
		{name: "000 retries exhausted", overrides: &agentv1.RunOverrides{MaxRetries: i32(2)},
			turns:   []llmtest.Turn{{Failure: llmtest.FailInvalidResponse}},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROVIDER, exit: "LLM_ERROR", roles: "SU", accounting: "LLM:FAILED LLM:FAILED",
			check: cannedReport("I'm having trouble processing your request. Please try again.")},
		{name: "000 auth error is fatal", turns: []llmtest.Turn{{Failure: llmtest.FailAuthError}},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROVIDER, exit: "AUTH_ERROR", roles: "SU", accounting: "LLM:FAILED",
			check: cannedReport("I'm having trouble processing your request. Please try again.")},
		{name: "000 quota exceeded is fatal", turns: []llmtest.Turn{{Failure: llmtest.FailQuotaExceeded}},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROVIDER, exit: "QUOTA_EXCEEDED", roles: "SU", accounting: "LLM:FAILED"},
		{name: "002 rate limited after retries", overrides: &agentv1.RunOverrides{MaxRetries: i32(2)},
			turns:   []llmtest.Turn{{Failure: llmtest.FailRateLimit, RetryAfterMS: 10}},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROVIDER, exit: "RATE_LIMITED", roles: "SU", accounting: "LLM:FAILED LLM:FAILED",
			check: cannedReport("I'm receiving too many requests. Please wait a moment.")},
		{name: "000 tool arguments repaired", turns: []llmtest.Turn{call("calculator", `{"expression": "6*7"`), text("42")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK TOOL:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := toolMessage(t, res, 0); got != "42" {
					t.Errorf("repaired call answered %q", got)
				}
			}},

		// Seed 000 §1: a call whose arguments cannot be parsed is dropped and the model told to
		// retry; a valid call of the same answer still runs.
		{name: "000 unparseable tool call dropped, the model told to call again",
			turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
				{Name: "calculator", Arguments: `no JSON here`}, {Name: "calculator", Arguments: `{"expression":"1+1"}`}}}, text("2")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, exit: "COMPLETED", roles: "SUATTA", accounting: "LLM:OK TOOL:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				want := `(tool failed: the arguments are not valid JSON: "no JSON here"; call the tool again with its arguments as one JSON object)`
				if got := toolMessage(t, res, 0); got != want {
					t.Errorf("tool message %q, want %q", got, want)
				}
				if got := toolMessage(t, res, 1); got != "2" {
					t.Errorf("the valid call answered %q", got)
				}
			}},
		// Valid JSON that is no object is not "not valid JSON": the model is told what it is.
		{name: "000 tool call with an array for arguments dropped, the model told why",
			turns:   []llmtest.Turn{call("calculator", `[1, 2]`), text("I could not compute it.")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				want := `(tool failed: the arguments are a JSON array, not an object: "[1, 2]"; call the tool again with its arguments as one JSON object)`
				if got := toolMessage(t, res, 0); got != want {
					t.Errorf("tool message %q, want %q", got, want)
				}
			}},
		{name: "000 empty response is retried with the ephemeral notice", overrides: &agentv1.RunOverrides{MaxRetries: i32(2)},
			turns: []llmtest.Turn{{Respond: func(req llmtest.Request, attempt int) llmtest.Turn {
				if attempt == 1 {
					return llmtest.Turn{} // no content, no tool calls, no reasoning
				}
				if last := req.Messages[len(req.Messages)-1]; string(last.Content) != orchestrator.EmptyResponseNotice {
					return llmtest.Turn{Content: "the notice was missing"}
				}
				return llmtest.Turn{Content: "answered after the notice"}
			}}},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := res.GetFinalReport().GetContent(); got != "answered after the notice" {
					t.Errorf("answer %q", got)
				}
				for _, m := range res.GetConversation() {
					if m.GetContent() == orchestrator.EmptyResponseNotice {
						t.Error("the ephemeral notice was stored in the conversation")
					}
				}
			}},
		{name: "000 only empty responses exhaust the retries", overrides: &agentv1.RunOverrides{MaxRetries: i32(2)},
			turns:   []llmtest.Turn{{Respond: func(llmtest.Request, int) llmtest.Turn { return llmtest.Turn{} }}},
			outcome: typev1.Outcome_OUTCOME_FAILED_PROTOCOL_MALFORMED, exit: "LLM_GENERATION_FAILURE", roles: "SU", accounting: "LLM:OK LLM:OK"},

		// Seed 000 §5: the final report.
		{name: "000 final_report with content_json", request: jsonRun,
			turns:   []llmtest.Turn{report(`{"report_format":"json","content_json":{"answer":42}}`)},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) {
				if got := res.GetFinalReport().GetContentJson().GetFields()["answer"].GetNumberValue(); got != 42 {
					t.Errorf("content_json %v", res.GetFinalReport().GetContentJson())
				}
				if !slices.Contains(reqs[0].ToolNames(), "final_report") {
					t.Errorf("final_report not offered: %v", reqs[0].ToolNames())
				}
			}},
		{name: "000 final_report stringified nested JSON repaired", request: jsonRun,
			turns:   []llmtest.Turn{report(`{"report_format":"json","content_json":{"answer":7,"detail":"{\"why\":\"because\"}"}}`)},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := res.GetFinalReport().GetContentJson().GetFields()["detail"].GetStructValue().GetFields()["why"].GetStringValue(); got != "because" {
					t.Errorf("content_json %v", res.GetFinalReport().GetContentJson())
				}
			}},
		// Seed 001: strict_mode disables recovery; the model is told, and sends the object.
		{name: "001 strict mode: final_report stringified nested JSON refused", request: jsonRun, overrides: &agentv1.RunOverrides{StrictMode: yes()},
			turns: []llmtest.Turn{report(`{"report_format":"json","content_json":{"answer":7,"detail":"{\"why\":\"because\"}"}}`),
				report(`{"report_format":"json","content_json":{"answer":7,"detail":{"why":"because"}}}`)},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := toolMessage(t, res, 0); !strings.Contains(got, "does not match the output schema") {
					t.Errorf("refusal %q", got)
				}
				if got := res.GetFinalReport().GetContentJson().GetFields()["detail"].GetStructValue().GetFields()["why"].GetStringValue(); got != "because" {
					t.Errorf("content_json %v", res.GetFinalReport().GetContentJson())
				}
			}},
		{name: "000 final_report refused then fixed", request: jsonRun,
			turns: []llmtest.Turn{report(`{"report_format":"json","content_json":{"answer":"forty-two"}}`),
				report(`{"report_format":"json","content_json":{"answer":42}}`)},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := toolMessage(t, res, 0); !strings.Contains(got, "does not match the output schema") {
					t.Errorf("refusal %q", got)
				}
			}},
		{name: "000 final_report failing collapses the remaining turns", request: jsonRun,
			turns:   []llmtest.Turn{report(`{"report_format":"json","content_json":{}}`), report(`{"report_format":"json"}`), text("never asked")},
			outcome: typev1.Outcome_OUTCOME_FAILED_VALIDATION, exit: "FINAL_REPORT_INVALID", roles: "SUATAT", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, _ *typev1.RunResult, reqs []llmtest.Request) {
				if n := len(reqs); n != 2 {
					t.Errorf("%d LLM requests after the collapse, want 2", n)
				}
			}},
		// The last turn under max_turns has no turn after it to fix a refused final report in.
		{name: "000 final_report refused in the last turn", request: jsonRun, overrides: &agentv1.RunOverrides{MaxTurns: i32(1)},
			turns:   []llmtest.Turn{report(`{"report_format":"json","content_json":{"answer":"forty-two"}}`), text("never asked")},
			outcome: typev1.Outcome_OUTCOME_FAILED_VALIDATION, exit: "FINAL_REPORT_INVALID", roles: "SUAT", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) {
				if n := len(reqs); n != 1 {
					t.Errorf("%d LLM requests, want 1", n)
				}
				if !strings.Contains(res.GetError().GetMessage(), "does not match the output schema") {
					t.Errorf("error %q, want the refusal's reason", res.GetError().GetMessage())
				}
			}},
		// Seed 000 §1: encoding is raw or base64, and base64 is decoded before use; a report
		// that cannot be decoded to text is refused, not stored as it came.
		{name: "000 final_report base64 decoded", turns: []llmtest.Turn{report(`{"report_format":"text","report_content":"aGVsbG8=","encoding":"base64"}`)},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK",
			check: cannedReport("hello")},
		{name: "000 final_report unknown encoding refused",
			turns:   []llmtest.Turn{report(`{"report_format":"text","report_content":"aGVsbG8=","encoding":"b64"}`), text("hello")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got, want := toolMessage(t, res, 0), `(tool failed: final_report: encoding must be raw or base64, got "b64")`; got != want {
					t.Errorf("refusal %q, want %q", got, want)
				}
				cannedReport("hello")(t, res, nil)
			}},
		// A report_content that is not text was refused as empty, a reason the model could not
		// act on.
		{name: "000 final_report whose report_content is not text refused",
			turns:   []llmtest.Turn{report(`{"report_format":"text","report_content":{"text":"hello"}}`), text("hello")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got, want := toolMessage(t, res, 0), "(tool failed: final_report: report_content must be a string, got an object)"; got != want {
					t.Errorf("refusal %q, want %q", got, want)
				}
			}},
		{name: "000 json final_report with an object in report_content refused", request: jsonRun,
			turns: []llmtest.Turn{report(`{"report_format":"json","report_content":{"answer":1}}`),
				report(`{"report_format":"json","content_json":{"answer":1}}`)},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				want := "(tool failed: final_report: report_content must be a string, got an object; give the JSON object as content_json)"
				if got := toolMessage(t, res, 0); got != want {
					t.Errorf("refusal %q, want %q", got, want)
				}
			}},
		// "//79" decodes to the bytes ff fe fd, which are no text: kept, the report reached the
		// user as U+FFFD.
		{name: "000 final_report base64 of bytes that are not text refused",
			turns:   []llmtest.Turn{report(`{"report_format":"text","report_content":"//79","encoding":"base64"}`), text("hello")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got, want := toolMessage(t, res, 0), "(tool failed: final_report: report_content decoded from base64 is not UTF-8 text)"; got != want {
					t.Errorf("refusal %q, want %q", got, want)
				}
				cannedReport("hello")(t, res, nil)
			}},
		// Seed 000 §11: when one result is expected, the last valid final report is used; a
		// refused one beside it does not throw it away.
		{name: "000 final_report valid, then refused, in one answer", request: jsonRun,
			turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
				{Name: "final_report", Arguments: `{"report_format":"json","content_json":{"answer":42}}`},
				{Name: "final_report", Arguments: `{"report_format":"json","content_json":{"answer":"forty-two"}}`}}},
				text("never asked")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUAT", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := res.GetFinalReport().GetContentJson().GetFields()["answer"].GetNumberValue(); got != 42 {
					t.Errorf("content_json %v, want the valid report's", res.GetFinalReport().GetContentJson())
				}
			}},
		// JSON in a Markdown code fence is taken as a text answer and an XML final report take it.
		{name: "000 final_report with fenced JSON in report_content", request: jsonRun,
			turns:   []llmtest.Turn{report(`{"report_format":"json","report_content":"` + "```json\\n{\\\"answer\\\": 3}\\n```" + `"}`)},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := res.GetFinalReport().GetContentJson().GetFields()["answer"].GetNumberValue(); got != 3 {
					t.Errorf("content_json %v", res.GetFinalReport().GetContentJson())
				}
			}},
		{name: "000 text answer in a code fence accepted as json", request: jsonRun, turns: []llmtest.Turn{text("```json\n{\"answer\": 4}\n```")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK"},
		{name: "000 text answer accepted as json", request: jsonRun, turns: []llmtest.Turn{text(`{"answer": 5}`)},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUA", accounting: "LLM:OK"},

		// Budgets and policies of DESIGN §5 (seeds 001, 002).
		// Seed 002 §7: the dropped call's tool message is for the model; one final answer follows.
		{name: "002 max tool calls total", overrides: &agentv1.RunOverrides{MaxToolCallsTotal: i32(1)},
			turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
				{Name: "calculator", Arguments: `{"expression":"1+1"}`}, {Name: "calculator", Arguments: `{"expression":"2+2"}`}}},
				text("1+1 is 2.")},
			outcome: typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, exit: "MAX_TOOL_CALLS_REACHED", roles: "SUATTA", accounting: "LLM:OK TOOL:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) {
				if r := res.GetFinalReport(); r.GetContent() != "1+1 is 2." || r.GetStatus() != typev1.ReportStatus_REPORT_STATUS_SUCCESS {
					t.Errorf("final report %v, want the model's answer", r)
				}
				if len(reqs) != 2 {
					t.Fatalf("%d LLM requests, want 2", len(reqs))
				}
				if got := reqs[1].ToolNames(); !slices.Equal(got, []string{"final_report"}) {
					t.Errorf("the final turn offered %v", got)
				}
			}},
		{name: "002 tool call budget, json answer in the final turn", overrides: &agentv1.RunOverrides{MaxToolCallsTotal: i32(1)}, request: jsonRun,
			turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
				{Name: "calculator", Arguments: `{"expression":"1+1"}`}, {Name: "calculator", Arguments: `{"expression":"2+2"}`}}},
				report(`{"report_format":"json","content_json":{"answer":2}}`)},
			outcome: typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, exit: "MAX_TOOL_CALLS_REACHED", roles: "SUATTA", accounting: "LLM:OK TOOL:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				if got := res.GetFinalReport().GetContentJson().GetFields()["answer"].GetNumberValue(); got != 2 {
					t.Errorf("content_json %v", res.GetFinalReport().GetContentJson())
				}
			}},
		{name: "001 max tokens consumed", overrides: &agentv1.RunOverrides{MaxTokensConsumed: i64(10)},
			turns:   []llmtest.Turn{{Content: "a long answer", Usage: &llmtest.Usage{PromptTokens: 30, CompletionTokens: 7}}},
			outcome: typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, exit: "MAX_TOKENS_REACHED", roles: "SUA", accounting: "LLM:OK"},
		// The answer that spends the token budget ends the run at COMMIT whatever its calls
		// return: they are dropped in VALIDATE_CALLS, and never run.
		{name: "001 tool call over a spent token budget",
			overrides: &agentv1.RunOverrides{MaxTokensConsumed: i64(10)},
			turns: []llmtest.Turn{{
				ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression":"1+1"}`}},
				Usage:     &llmtest.Usage{PromptTokens: 30, CompletionTokens: 7},
			}},
			outcome: typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, exit: "MAX_TOKENS_REACHED",
			roles: "SUAT", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
				want := "(tool failed: dropped: the run's budget of 10 tokens is used up)"
				if got := toolMessage(t, res, 0); got != want {
					t.Errorf("tool message %q, want %q", got, want)
				}
				if res.GetToolCalls() != 0 {
					t.Errorf("tool_calls %d, want 0: the call ran over the spent budget",
						res.GetToolCalls())
				}
			}},
		// An attempt that spends the token budget is the turn's last: another attempt (after an
		// empty answer here) would only spend more before COMMIT ends the run.
		{name: "001 no attempt over a spent token budget",
			overrides: &agentv1.RunOverrides{MaxTokensConsumed: i64(10), MaxRetries: i32(3)},
			turns: []llmtest.Turn{{Respond: func(llmtest.Request, int) llmtest.Turn {
				return llmtest.Turn{Usage: &llmtest.Usage{PromptTokens: 30, CompletionTokens: 7}}
			}}},
			outcome: typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, exit: "MAX_TOKENS_REACHED",
			roles: "SU", accounting: "LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) {
				if len(reqs) != 1 || res.GetUsage().GetTotal() != 37 {
					t.Errorf("%d requests, %d tokens; want 1 request of 37 tokens", len(reqs),
						res.GetUsage().GetTotal())
				}
			}},
		{name: "001 cycle_forbid", overrides: &agentv1.RunOverrides{CycleForbid: []*typev1.ToolPair{{FromTool: "calculator", ToTool: "calculator"}}},
			turns:   []llmtest.Turn{call("calculator", `{"expression":"1+1"}`), call("calculator", `{"expression":"2+2"}`)},
			outcome: typev1.Outcome_OUTCOME_FAILED_CONTRACT_VIOLATION, exit: "CYCLE_FORBIDDEN", roles: "SUATAT", accounting: "LLM:OK TOOL:OK LLM:OK",
			check: cannedReport(orchestrator.MessageCycleForbidden)},
		{name: "001 allowed_tools", overrides: &agentv1.RunOverrides{AllowedTools: []string{"current_time"}},
			turns:   []llmtest.Turn{call("calculator", `{"expression":"1+1"}`), text("I may not calculate")},
			outcome: typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY, exit: "COMPLETED", roles: "SUATA", accounting: "LLM:OK LLM:OK",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) {
				if got := toolMessage(t, res, 0); !strings.Contains(got, `unknown tool "calculator"; available tools: current_time`) {
					t.Errorf("tool message %q", got)
				}
				if tools := reqs[0].ToolNames(); !slices.Equal(tools, []string{"current_time"}) {
					t.Errorf("offered %v", tools)
				}
			}},
		{name: "000 step timeout", overrides: &agentv1.RunOverrides{StepTimeoutMs: i64(300)},
			turns:   []llmtest.Turn{{Failure: llmtest.FailTimeout}},
			outcome: typev1.Outcome_OUTCOME_FAILED_TIMEOUT, exit: "TIMEOUT", roles: "SU", accounting: "LLM:FAILED"},
		// Long enough for PRECHECK, INTENT and PLAN on a loaded machine: the LLM call must start.
		{name: "001 total timeout", overrides: &agentv1.RunOverrides{TotalTimeoutMs: i64(2000)},
			turns:   []llmtest.Turn{{Failure: llmtest.FailTimeout}},
			outcome: typev1.Outcome_OUTCOME_FAILED_TIMEOUT, exit: "TIMEOUT", roles: "SU", accounting: "LLM:FAILED"},
		{name: "001 preflight: allowed tool not available", overrides: &agentv1.RunOverrides{AllowedTools: []string{"teleport"}},
			turns:   []llmtest.Turn{text("never asked")},
			outcome: typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, exit: "INVALID_CONTRACT", roles: "SU", accounting: "",
			check: noLLMCall},
		{name: "001 preflight: reserved context exceeds the window", overrides: &agentv1.RunOverrides{ContextWindow: i64(1000), MaxOutputTokens: i64(1000)},
			turns:   []llmtest.Turn{text("never asked")},
			outcome: typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, exit: "INVALID_CONTRACT", roles: "SU", accounting: "", check: noLLMCall},
		// Seed 001's context feasibility counts what is reserved for the system: a system
		// message that leaves no room in the window is a setup fault, not the user's.
		{name: "001 preflight: the system message does not fit the window", overrides: &agentv1.RunOverrides{ContextWindow: i64(100), ContextWindowBufferTokens: i64(0), MaxOutputTokens: i64(80)},
			turns:   []llmtest.Turn{text("never asked")},
			outcome: typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, exit: "INVALID_CONTRACT", roles: "SU", accounting: "",
			check: func(t *testing.T, res *typev1.RunResult, reqs []llmtest.Request) {
				if msg := res.GetError().GetMessage(); !strings.Contains(msg, "the system message") || !strings.Contains(msg, "100-token window") {
					t.Errorf("error %q, want the system message and the window named", msg)
				}
				noLLMCall(t, res, reqs)
			}},
		{name: "002 max context reached", overrides: &agentv1.RunOverrides{ContextWindow: i64(400), ContextWindowBufferTokens: i64(0), MaxOutputTokens: i64(100)},
			request: func(r *agentv1.RunRequest) { r.Message += strings.Repeat(" tell me more", 200) },
			turns:   []llmtest.Turn{text("never asked")},
			outcome: typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, exit: "MAX_CONTEXT_REACHED", roles: "SU", accounting: "", check: noLLMCall},
	}

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
			return
		}
		_, _ = w.Write([]byte(strings.Repeat("x", 100)))
	}))
	t.Cleanup(slow.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"slow_lookup": {Description: "A lookup that never answers.", Method: http.MethodGet, URL: slow.URL + "/slow"},
		"big_lookup":  {Description: "A lookup with a 100-byte answer.", Method: http.MethodGet, URL: slow.URL + "/big"},
	}
	var scenarios []llmtest.Scenario
	for _, tc := range cases {
		scenarios = append(scenarios, llmtest.Scenario{Name: tc.name, Match: "conformance: " + tc.name + "*", Turns: tc.turns})
	}
	h := start(t, cfg, scenarios...)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := &agentv1.RunRequest{Message: "conformance: " + tc.name, Overrides: tc.overrides}
			if tc.request != nil {
				tc.request(req)
			}
			res := h.runCase(t, req, tc.outcome, tc.exit, tc.roles, tc.accounting)
			if tc.check != nil {
				tc.check(t, res, requestsFor(h.llm, req.GetMessage()))
			}
		})
	}
}

// runCase runs req and asserts what every scenario table checks: outcome and exit reason,
// conversation roles (initials), accounting and the invariants of every run.
func (h *harness) runCase(t *testing.T, req *agentv1.RunRequest, outcome typev1.Outcome, exit, roles, accounting string) *typev1.RunResult {
	t.Helper()
	res := h.run(t, req)
	if res.GetOutcome() != outcome || res.GetExitReason() != exit {
		t.Fatalf("outcome %s %s, want %s %s (error %v)", res.GetOutcome(), res.GetExitReason(), outcome, exit, res.GetError())
	}
	if got := roleInitials(res.GetConversation()); got != roles {
		t.Errorf("conversation %s, want %s", got, roles)
	}
	if got := accountingSummary(res.GetAccounting()); got != accounting {
		t.Errorf("accounting %q, want %q", got, accounting)
	}
	checkInvariants(t, res)
	return res
}

func cannedReport(want string) func(*testing.T, *typev1.RunResult, []llmtest.Request) {
	return func(t *testing.T, res *typev1.RunResult, _ []llmtest.Request) {
		if got := res.GetFinalReport().GetContent(); got != want {
			t.Errorf("final report %q, want %q", got, want)
		}
	}
}

func noLLMCall(t *testing.T, _ *typev1.RunResult, reqs []llmtest.Request) {
	if n := len(reqs); n != 0 {
		t.Errorf("%d LLM requests, want none", n)
	}
}

func oneLLMCall(t *testing.T, _ *typev1.RunResult, reqs []llmtest.Request) {
	if n := len(reqs); n != 1 {
		t.Errorf("%d LLM requests, want 1", n)
	}
}

// requestsFor returns the LLM requests of the run whose first user message is message.
func requestsFor(llm *llmtest.Server, message string) []llmtest.Request {
	var out []llmtest.Request
	for _, r := range llm.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" {
				if string(m.Content) == message {
					out = append(out, r)
				}
				break
			}
		}
	}
	return out
}

func roleInitials(msgs []*typev1.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(strings.TrimPrefix(m.GetRole().String(), "ROLE_")[:1])
	}
	return b.String()
}

func accountingSummary(entries []*typev1.AccountingEntry) string {
	var parts []string
	for _, a := range entries {
		parts = append(parts, strings.TrimPrefix(a.GetType().String(), "ACCOUNTING_TYPE_")+":"+strings.TrimPrefix(a.GetStatus().String(), "ACCOUNTING_STATUS_"))
	}
	return strings.Join(parts, " ")
}

// llmAttempts counts a run's accounted LLM attempts.
func llmAttempts(res *typev1.RunResult) int {
	n := 0
	for _, a := range res.GetAccounting() {
		if a.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_LLM {
			n++
		}
	}
	return n
}

// checkInvariants holds for every run: the report status follows its source (partial for a
// successful answer cut off at the output token limit), accounting entries carry their
// fields, the transcript chain verifies and ends in one TERMINATE.
func checkInvariants(t *testing.T, res *typev1.RunResult) {
	t.Helper()
	wantStatus := typev1.ReportStatus_REPORT_STATUS_FAILURE
	switch {
	case res.GetSuccess() && res.GetFinalReport().GetMetadata().GetFields()["truncated"].GetBoolValue():
		wantStatus = typev1.ReportStatus_REPORT_STATUS_PARTIAL
	case res.GetSuccess() || res.GetExitReason() == orchestrator.ExitMaxToolCalls && res.GetFinalReport().GetStatus() == typev1.ReportStatus_REPORT_STATUS_SUCCESS:
		// The model gave the answer: every successful run, and a run whose final turn
		// answered after the tool call budget ran out (seed 002 §7).
		wantStatus = typev1.ReportStatus_REPORT_STATUS_SUCCESS
	}
	if res.GetFinalReport().GetStatus() != wantStatus || res.GetFinalReport().GetTs() == nil {
		t.Errorf("final report %v for success=%v", res.GetFinalReport(), res.GetSuccess())
	}
	if !res.GetSuccess() && res.GetError().GetCode() != res.GetExitReason() {
		t.Errorf("error %v does not carry exit reason %s", res.GetError(), res.GetExitReason())
	}
	for _, a := range res.GetAccounting() {
		if a.GetTimestampMs() == 0 {
			t.Errorf("accounting entry without timestamp: %v", a)
		}
		switch a.GetType() {
		case typev1.AccountingType_ACCOUNTING_TYPE_LLM:
			if a.GetProvider() == "" || a.GetModel() == "" {
				t.Errorf("llm entry without provider/model: %v", a)
			}
			if a.GetStatus() == typev1.AccountingStatus_ACCOUNTING_STATUS_OK && a.GetActualModel() == "" {
				t.Errorf("answered llm entry without the model the provider reported: %v", a)
			}
		case typev1.AccountingType_ACCOUNTING_TYPE_TOOL:
			if a.GetCommand() == "" {
				t.Errorf("tool entry without command: %v", a)
			}
		}
		if a.GetStatus() == typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED && a.GetError() == "" {
			t.Errorf("failed entry without error: %v", a)
		}
	}
	clone := proto.CloneOf(res.GetContract())
	clone.ContractHash = ""
	encoded, err := proto.MarshalOptions{Deterministic: true}.Marshal(clone)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(encoded); hex.EncodeToString(sum[:]) != res.GetContract().GetContractHash() {
		t.Errorf("contract_hash %s is not the SHA-256 of the contract's deterministic serialisation", res.GetContract().GetContractHash())
	}
	if err := transcript.VerifyResult(res); err != nil {
		t.Errorf("transcript: %v", err)
	}
	terminates := 0
	// The contract is sealed by the last INTENT entry: the entries up to it (PRECHECK, and a
	// question about the intent with its answer) carry the draft's hash.
	sealed := -1
	for i, e := range res.GetTranscript() {
		if e.GetState() == typev1.RunState_RUN_STATE_PRECHECK || e.GetState() == typev1.RunState_RUN_STATE_INTENT {
			sealed = i
		}
	}
	for i, e := range res.GetTranscript() {
		if e.GetContractHash() != res.GetContract().GetContractHash() && i > sealed {
			t.Errorf("entry %d (%s) carries contract %s, the run's is %s", e.GetSeq(), e.GetState(), e.GetContractHash(), res.GetContract().GetContractHash())
		}
		if e.GetState() == typev1.RunState_RUN_STATE_TERMINATE {
			terminates++
		}
	}
	if n := len(res.GetTranscript()); terminates != 1 || res.GetTranscript()[n-1].GetState() != typev1.RunState_RUN_STATE_TERMINATE {
		t.Errorf("%d TERMINATE entries; the last entry is %s", terminates, res.GetTranscript()[n-1].GetState())
	}
}

// TestACallIDUsedTwiceRunsTwice: a model that gives two calls the same id (call_1 in each
// turn) has each executed: the second got the first's result, kept under the run and the
// id, though it never ran, and was accounted as run. The second call gets an id of its own.
func TestACallIDUsedTwiceRunsTwice(t *testing.T) {
	calc := func(expr string) llmtest.Turn {
		return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "calculator", Arguments: `{"expression":"` + expr + `"}`}}}
	}
	h := start(t, nil, llmtest.Scenario{Name: "reuse", Match: "an id used twice", Turns: []llmtest.Turn{calc("1+1"), calc("2+3"), text("2, then 5")}})
	res := h.run(t, &agentv1.RunRequest{Message: "an id used twice"})
	if first, second := toolMessage(t, res, 0), toolMessage(t, res, 1); first != "2" || second != "5" {
		t.Errorf("the calls' results %q and %q, want 2 and 5", first, second)
	}
	var ids []string
	for _, m := range res.GetConversation() {
		for _, c := range m.GetToolCalls() {
			ids = append(ids, c.GetId())
		}
		if m.GetRole() == typev1.Role_ROLE_TOOL {
			ids = append(ids, "result of "+m.GetToolCallId())
		}
	}
	if want := []string{"call_1", "result of call_1", "call_1_2", "result of call_1_2"}; !slices.Equal(ids, want) {
		t.Errorf("the conversation's calls and results %q, want %q", ids, want)
	}
	checkInvariants(t, res)
}

// TestCycleForbidCountsTheCallsThatRan: cycle_forbid forbids a transition between calls that
// ran (seed 001: "If runtime observes a transition matching any forbidden pair"). A call the
// action stage refused (invalid arguments) never ran: the same two calls end the run
// COMPLETED in one turn as across two, where in one turn they ended it CYCLE_FORBIDDEN. Two
// calls that both run, in one turn, still end it CYCLE_FORBIDDEN, the second refused.
func TestCycleForbidCountsTheCallsThatRan(t *testing.T) {
	bad, good := `{"expr":"1+1"}`, `{"expression":"2+2"}`
	h := start(t, nil,
		llmtest.Scenario{Name: "one turn", Match: "refused then run in one turn", Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
			{Name: "calculator", Arguments: bad}, {Name: "calculator", Arguments: good}}}, text("4")}},
		llmtest.Scenario{Name: "two turns", Match: "refused then run in two turns", Turns: []llmtest.Turn{call("calculator", bad), call("calculator", good), text("4")}},
		llmtest.Scenario{Name: "both run", Match: "both run in one turn", Turns: []llmtest.Turn{{ToolCalls: []llmtest.ToolCall{
			{Name: "calculator", Arguments: good}, {Name: "calculator", Arguments: `{"expression":"3+3"}`}}}, text("never")}},
	)
	forbid := &agentv1.RunOverrides{CycleForbid: []*typev1.ToolPair{{FromTool: "calculator", ToTool: "calculator"}}}
	for _, message := range []string{"refused then run in one turn", "refused then run in two turns"} {
		res := h.run(t, &agentv1.RunRequest{Message: message, Overrides: forbid})
		if res.GetExitReason() != "COMPLETED" || res.GetToolCalls() != 1 {
			t.Errorf("%s: %s %s, %d tool calls; want COMPLETED with the one that ran", message, res.GetOutcome(), res.GetExitReason(), res.GetToolCalls())
		}
	}
	res := h.run(t, &agentv1.RunRequest{Message: "both run in one turn", Overrides: forbid})
	if res.GetExitReason() != "CYCLE_FORBIDDEN" || res.GetToolCalls() != 1 {
		t.Errorf("both run: %s %s, %d tool calls; want CYCLE_FORBIDDEN after the first", res.GetOutcome(), res.GetExitReason(), res.GetToolCalls())
	}
	if got := toolMessage(t, res, 1); got != "(tool failed: the tool sequence calculator -> calculator is forbidden by the contract)" {
		t.Errorf("the second call's message %q", got)
	}
	checkInvariants(t, res)
}

// TestCycleForbidNamesToolsOfTheMesh: a cycle_forbid pair naming a tool the mesh does not have
// (an MCP tool by its name on its server, notes.search, rather than its name in the mesh) could
// never match a call, so the rule it states was never enforced and the run went on as if it
// had none. Like an allowed_tools entry the action stage does not have, it makes a contract no
// run can use: FAILED_PREFLIGHT / INVALID_CONTRACT before any LLM call, naming the pair.
func TestCycleForbidNamesToolsOfTheMesh(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "never", Match: "*", Turns: []llmtest.Turn{text("never asked")}})
	for _, tc := range []struct {
		pair   *typev1.ToolPair
		reason string
	}{
		{&typev1.ToolPair{FromTool: "notes.search", ToTool: "calculator"},
			`cycle_forbid[1] ["notes.search", "calculator"] names tool "notes.search", which is not available (available: calculator, `},
		{&typev1.ToolPair{FromTool: "calculator", ToTool: "teleport"},
			`cycle_forbid[1] ["calculator", "teleport"] names tool "teleport", which is not available`},
	} {
		t.Run(tc.pair.GetFromTool()+" -> "+tc.pair.GetToTool(), func(t *testing.T) {
			forbid := []*typev1.ToolPair{{FromTool: "calculator", ToTool: "calculator"}, tc.pair}
			res := h.run(t, &agentv1.RunRequest{Message: "what is 2+2?", Overrides: &agentv1.RunOverrides{CycleForbid: forbid}})
			wantInvalidContract(t, res, tc.reason)
		})
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Errorf("%d provider requests, want none", n)
	}
}

// TestContractNamesItsModelProfile: the contract carries its provenance (seed 001 Phase 2b:
// contract_id, contract_hash and model_profile_id), and its model profile is the one every
// transcript entry records: the first target, the request's when it names targets.
func TestContractNamesItsModelProfile(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "profile", Match: "which model profile*", Turns: []llmtest.Turn{text("this one")}})
	for _, tc := range []struct {
		overrides *agentv1.RunOverrides
		want      string
	}{
		{nil, "scripted/gpt-test"},
		{&agentv1.RunOverrides{Targets: []*typev1.Target{{Provider: "scripted2", Model: "gpt-b"}, {Provider: "scripted", Model: "gpt-a"}}}, "scripted2/gpt-b"},
	} {
		res := h.run(t, &agentv1.RunRequest{Message: "which model profile, " + tc.want, Overrides: tc.overrides})
		c := res.GetContract()
		if c.GetModelProfileId() != tc.want || c.GetContractId() != res.GetRunId() || c.GetContractHash() == "" {
			t.Errorf("contract id %q, hash %q, model_profile_id %q; want the run's id, a hash and %q",
				c.GetContractId(), c.GetContractHash(), c.GetModelProfileId(), tc.want)
		}
		for _, e := range res.GetTranscript() {
			if e.GetModelProfileId() != c.GetModelProfileId() {
				t.Errorf("entry %d (%s) records model profile %q, the contract %q", e.GetSeq(), e.GetState(), e.GetModelProfileId(), c.GetModelProfileId())
				break
			}
		}
		checkInvariants(t, res)
	}
}

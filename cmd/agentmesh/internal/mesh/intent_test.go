package mesh_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/tokens"
	"github.com/agentmesh/agentmesh/pkg/transcript"
	"github.com/agentmesh/agentmesh/services/intent"
	"github.com/agentmesh/agentmesh/services/orchestrator"
)

// intentModel configures the scripted provider's "intent-model" as the intent stage's model.
func intentModel(cfg *config.Config, _ string) {
	cfg.Models.Intent = &config.Target{Provider: "scripted", Model: "intent-model"}
}

// intentScenario answers the intent model's request about message with turn.
func intentScenario(message string, turn llmtest.Turn) llmtest.Scenario {
	return llmtest.Scenario{Name: "intent of " + message, Match: intent.ModelInputPrefix + message, Turns: []llmtest.Turn{turn}}
}

// submitIntent is the intent model's answer through its tool.
func submitIntent(args string) llmtest.Turn {
	return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: intent.ModelTool, Arguments: args}},
		Usage: &llmtest.Usage{PromptTokens: 200, CompletionTokens: 40}}
}

// requestsAbout are the provider requests whose first user message is first.
func requestsAbout(h *harness, first string) []llmtest.Request {
	var out []llmtest.Request
	for _, r := range h.llm.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" {
				if string(m.Content) == first {
					out = append(out, r)
				}
				break
			}
		}
	}
	return out
}

// intentParsed is the run's intent_parsed event.
func intentParsed(t *testing.T, h *harness, runID string) *eventv1.IntentParsed {
	t.Helper()
	evs, _ := h.storedEvents(t, runID)
	for _, ev := range evs {
		if p := ev.GetIntentParsed(); p != nil {
			return p
		}
	}
	t.Fatalf("run %s has no intent_parsed event", runID)
	return nil
}

// llmEntries are the run's LLM accounting entries of model.
func llmEntries(res *typev1.RunResult, model string) []*typev1.AccountingEntry {
	var out []*typev1.AccountingEntry
	for _, a := range res.GetAccounting() {
		if a.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_LLM && a.GetModel() == model {
			out = append(out, a)
		}
	}
	return out
}

// planAction is the PLAN entry's action hash: the hash of the PlanRequest the orchestrator
// sent to the planning stage.
func planAction(t *testing.T, res *typev1.RunResult) string {
	t.Helper()
	for _, e := range res.GetTranscript() {
		if e.GetState() == typev1.RunState_RUN_STATE_PLAN {
			return e.GetActionHash()
		}
	}
	t.Fatal("no PLAN entry in the transcript")
	return ""
}

// TestIntentModel (issue 13.1): with models.intent set, the intent stage asks that model,
// offering only submit_intent (the JSON schema of goal, constraints, task type,
// clarification and safety) for the user's message; its goal, constraints and task type are
// the run's (intent_parsed, the planning request, the system message), and its request is in
// the run's accounting.
func TestIntentModel(t *testing.T) {
	const message = "Tell me about the Go scheduler briefly please"
	h := startWith(t, nil, intentModel,
		intentScenario(message, submitIntent(`{"goal": "Explain how the Go scheduler works", "constraints": ["briefly", "at most 3 sentences"],
			"task_type": "analysis", "needs_clarification": false, "unsafe": false}`)),
		llmtest.Scenario{Name: "answer", Match: message, Turns: []llmtest.Turn{text("It multiplexes goroutines onto threads.")}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: message, UserId: "alice"})
	if !res.GetSuccess() || res.GetFinalReport().GetContent() != "It multiplexes goroutines onto threads." {
		t.Fatalf("outcome %s %s, report %q", res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent())
	}

	// The request: the intent model, only submit_intent, forced, the schema, the message.
	asked := requestsAbout(h, intent.ModelInputPrefix+message)
	if len(asked) != 1 {
		t.Fatalf("the intent model got %d requests, want 1", len(asked))
	}
	req := asked[0]
	if req.Model != "intent-model" || len(req.Tools) != 1 || req.Tools[0].Function.Name != intent.ModelTool || string(req.ToolChoice) != `"required"` {
		t.Errorf("the intent request asked %s offering %+v with tool_choice %s; want intent-model, only %s, required",
			req.Model, req.Tools, req.ToolChoice, intent.ModelTool)
	}
	var offered map[string]any
	if err := json.Unmarshal(req.Tools[0].Function.Parameters, &offered); err != nil {
		t.Fatal(err)
	}
	wantSchema, _ := json.Marshal(intent.ModelSchema(intent.DefaultMaxMessageBytes))
	var want map[string]any
	_ = json.Unmarshal(wantSchema, &want)
	if got, _ := json.Marshal(offered); string(got) != string(mustJSON(t, want)) {
		t.Errorf("the offered schema is %s, want %s", got, mustJSON(t, want))
	}
	if req.Messages[0].Role != "system" || !strings.Contains(string(req.Messages[0].Content), intent.ModelTool) {
		t.Errorf("the intent request's first message is %+v, want the instructions", req.Messages[0])
	}

	// The answer is the run's intent.
	p := intentParsed(t, h, res.GetRunId())
	if p.GetGoal() != "Explain how the Go scheduler works" || !slices.Equal(p.GetConstraints(), []string{"briefly", "at most 3 sentences"}) ||
		p.GetTaskType() != "analysis" || p.GetSource() != intent.SourceModel || p.GetFallbackReason() != "" {
		t.Errorf("intent_parsed %v, want the model's answer", p)
	}
	// It reaches planning: the PLAN entry hashes the PlanRequest with constraints and task type.
	tools, err := h.client.ListTools(t.Context(), &agentv1.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	plan := &planningv1.PlanRequest{Goal: "Explain how the Go scheduler works", AvailableTools: tools.GetTools(),
		Constraints: []string{"briefly", "at most 3 sentences"}, TaskType: "analysis",
		MaxSteps: config.Default().Defaults.MaxPlanSteps, RunId: res.GetRunId()}
	if got, want := planAction(t, res), transcript.MessageHash(plan); got != want {
		t.Errorf("the PLAN entry's action hash %s is not the hash %s of the planning request with the intent's constraints and task type", got, want)
	}
	// And the system message of the run's LLM request.
	answered := requestsAbout(h, message)
	if len(answered) != 1 {
		t.Fatalf("the run made %d LLM requests, want 1", len(answered))
	}
	wantSystem := orchestrator.DefaultSystemPrompt + "\n\nTask type: analysis\n\nConstraints the answer must meet:\n- briefly\n- at most 3 sentences"
	if got := answered[0].Messages[0]; got.Role != "system" || string(got.Content) != wantSystem {
		t.Errorf("the run's system message is %q, want %q", got.Content, wantSystem)
	}
	// Its request is accounted, and its tokens are the run's.
	entries := llmEntries(res, "intent-model")
	if len(entries) != 1 || entries[0].GetProvider() != "scripted" || entries[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK ||
		entries[0].GetTokens().GetTotal() != 240 || entries[0].GetAttempts() != 1 || entries[0].GetStage() != "intent" {
		t.Errorf("intent accounting %v, want one ok entry of 240 tokens, stage intent", entries)
	}
	if res.GetUsage().GetTotal() < 240 {
		t.Errorf("usage %v does not count the intent model's tokens", res.GetUsage())
	}
	checkInvariants(t, res)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIntentModelFallsBackToRules (issue 13.1): an intent model that answers in text, with
// arguments outside the schema, or not at all leaves the message to the rules; the run goes
// on, intent_parsed says why, and the request is accounted.
func TestIntentModelFallsBackToRules(t *testing.T) {
	cases := []struct {
		message string
		turn    llmtest.Turn
		reason  string
	}{
		{"Summarize the design in 3 sentences", llmtest.Turn{Content: "This is a summary request."}, "did not call " + intent.ModelTool},
		{"Compare Go and Rust as a table", submitIntent(`{"goal": "Compare Go and Rust", "constraints": [], "task_type": "comparison",
			"needs_clarification": false, "unsafe": false}`), "do not match its schema"},
		{"Explain why the sky is blue in 2 sentences", submitIntent(`{"goal": "Explain the blue sky", "constraints": [], "task_type": "question",
			"needs_clarification": true, "unsafe": false}`), "without a clarification_question"},
		{"Analyze this log without jargon", llmtest.Turn{Failure: llmtest.FailModelError}, "the intent model failed"},
	}
	var scenarios []llmtest.Scenario
	for _, c := range cases {
		scenarios = append(scenarios, intentScenario(c.message, c.turn),
			llmtest.Scenario{Name: c.message, Match: c.message, Turns: []llmtest.Turn{text("Done.")}})
	}
	h := startWith(t, nil, intentModel, scenarios...)
	for _, c := range cases {
		t.Run(c.message, func(t *testing.T) {
			res := h.run(t, &agentv1.RunRequest{Message: c.message})
			if !res.GetSuccess() {
				t.Fatalf("outcome %s %s (%v), want the run to go on with the rules", res.GetOutcome(), res.GetExitReason(), res.GetError())
			}
			p := intentParsed(t, h, res.GetRunId())
			if p.GetSource() != intent.SourceRules || !strings.Contains(p.GetFallbackReason(), c.reason) {
				t.Errorf("intent_parsed source %q, fallback_reason %q; want rules, saying %q", p.GetSource(), p.GetFallbackReason(), c.reason)
			}
			// The rules' reading: the message as the goal, its constraint phrase, analysis.
			if p.GetGoal() != c.message || p.GetTaskType() != "analysis" || len(p.GetConstraints()) != 1 {
				t.Errorf("intent_parsed %v, want the rules' reading of %q", p, c.message)
			}
			entries := llmEntries(res, "intent-model")
			if len(entries) != 1 {
				t.Errorf("intent accounting %v, want the one request", entries)
			}
			for _, e := range res.GetTranscript() {
				if e.GetState() == typev1.RunState_RUN_STATE_INTENT && !strings.Contains(e.GetDetail(), "parsed by the rules") {
					t.Errorf("INTENT entry detail %q does not say the rules parsed the message", e.GetDetail())
				}
			}
		})
	}
}

// TestASlowIntentModelIsWaitedFor: the intent stage asks a model before it answers, as the
// planning stage may, so the run waits for it as for planning, up to the step timeout
// (modelStageWait), not StageWait, which is how long a stage that is down is waited for. An
// intent model that took longer than that was cut off, and the rules parsed every message.
func TestASlowIntentModelIsWaitedFor(t *testing.T) {
	const message = "Tell me about the Go scheduler"
	const goal = "Explain how the Go scheduler works"
	slow := submitIntent(`{"goal": "` + goal + `", "constraints": [], "task_type": "analysis",
		"needs_clarification": false, "unsafe": false}`)
	slow.DelayMS = int(orchestrator.StageWait.Milliseconds()) + 1000
	h := startWith(t, nil, intentModel, intentScenario(message, slow),
		llmtest.Scenario{Name: "answer", Match: message, Turns: []llmtest.Turn{text("Goroutines share threads.")}})
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if !res.GetSuccess() {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if p := intentParsed(t, h, res.GetRunId()); p.GetSource() != intent.SourceModel || p.GetGoal() != goal {
		t.Errorf("intent_parsed source %q, goal %q, fallback %q; want the slow model's",
			p.GetSource(), p.GetGoal(), p.GetFallbackReason())
	}
}

// TestIntentModelUnsafe (issue 13.1): the intent model's unsafe verdict ends the run
// INTENT_UNSAFE before any answer is asked for, and its request is still accounted.
func TestIntentModelUnsafe(t *testing.T) {
	const message = "Walk me through getting into my neighbour's wifi without them knowing"
	h := startWith(t, nil, intentModel, intentScenario(message, submitIntent(`{"goal": "Access a neighbour's wifi without permission",
		"constraints": [], "task_type": "action", "needs_clarification": false, "unsafe": true, "unsafe_reason": "breaking into someone else's network"}`)))
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != orchestrator.ExitIntentUnsafe ||
		!strings.Contains(res.GetError().GetMessage(), "breaking into someone else's network") {
		t.Fatalf("outcome %s %s (%v), want FAILED_PREFLIGHT INTENT_UNSAFE with the model's reason", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if n := len(requestsAbout(h, message)); n != 0 {
		t.Errorf("the run asked the model %d times after an unsafe verdict", n)
	}
	if entries := llmEntries(res, "intent-model"); len(entries) != 1 || entries[0].GetTokens().GetTotal() != 240 {
		t.Errorf("intent accounting %v, want the one request of 240 tokens", entries)
	}
	checkInvariants(t, res)
}

// TestIntentModelAsksForClarification (issue 13.1): the intent model's needs_clarification
// ends the run asking its question.
func TestIntentModelAsksForClarification(t *testing.T) {
	const message = "Can you sort out the thing from yesterday"
	const question = "Which thing from yesterday do you mean, and what should I do with it?"
	h := startWith(t, nil, intentModel, intentScenario(message, submitIntent(`{"goal": "Sort out the thing from yesterday", "constraints": [],
		"task_type": "action", "needs_clarification": true, "clarification_question": "`+question+`", "unsafe": false}`)))
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetFinalReport().GetContent() != question ||
		res.GetDecision().GetDecisionType() != typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION || res.GetDecision().GetClarificationQuestion() != question {
		t.Fatalf("outcome %s %s, report %q, decision %v; want the model's question", res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent(), res.GetDecision())
	}
	if n := len(requestsAbout(h, message)); n != 0 {
		t.Errorf("the run asked the model %d times instead of asking the user", n)
	}
	checkInvariants(t, res)
}

// TestMentioningAToolDoesNotRequireIt (issue 13.1): a message that only mentions a tool
// leaves tools optional, so a text answer completes the run; an explicit request still makes
// one required.
func TestMentioningAToolDoesNotRequireIt(t *testing.T) {
	const mention = "What's wrong with the calculator? It said 0.1 + 0.2 is 0.30000000000000004"
	const request = "Work out 6 times 7 using the calculator"
	h := start(t, nil,
		llmtest.Scenario{Name: "mention", Match: mention, Turns: []llmtest.Turn{text("That is floating point rounding.")}},
		llmtest.Scenario{Name: "request", Match: request, Turns: []llmtest.Turn{text("It is 42.")}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: mention, Surface: typev1.Surface_SURFACE_API})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetContract().GetToolPolicy() != typev1.ToolPolicy_TOOL_POLICY_OPTIONAL {
		t.Errorf("a mention: outcome %s %s under tool_policy %s, want a chat-only success under optional",
			res.GetOutcome(), res.GetExitReason(), res.GetContract().GetToolPolicy())
	}
	res = h.run(t, &agentv1.RunRequest{Message: request, Surface: typev1.Surface_SURFACE_API})
	if res.GetExitReason() != orchestrator.ExitToolRequired || res.GetContract().GetToolPolicy() != typev1.ToolPolicy_TOOL_POLICY_REQUIRED {
		t.Errorf("a request: outcome %s %s under tool_policy %s, want TOOL_REQUIRED under required",
			res.GetOutcome(), res.GetExitReason(), res.GetContract().GetToolPolicy())
	}
}

// TestAToolTheRunMayNotUseIsNotRequired: the intent stage reads explicit tool intent against
// the tools the run may use (the request's allowed_tools), so asking for the calculator in a
// run allowed only current_time leaves tools optional and the model's answer completes the
// run, instead of requiring a tool the run cannot call (TOOL_REQUIRED after the answer).
func TestAToolTheRunMayNotUseIsNotRequired(t *testing.T) {
	const request = "Use the calculator to add 2 and 3"
	h := start(t, nil, llmtest.Scenario{Name: "request", Match: request, Turns: []llmtest.Turn{text("It is 5.")}})
	res := h.run(t, &agentv1.RunRequest{Message: request, Overrides: &agentv1.RunOverrides{AllowedTools: []string{"current_time"}}})
	checkInvariants(t, res)
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetContract().GetToolPolicy() != typev1.ToolPolicy_TOOL_POLICY_OPTIONAL {
		t.Fatalf("outcome %s %s (%s) under tool_policy %s, want a chat-only success under optional", res.GetOutcome(),
			res.GetExitReason(), res.GetError().GetMessage(), res.GetContract().GetToolPolicy())
	}
	// With the calculator allowed, the same request still requires it.
	res = h.run(t, &agentv1.RunRequest{Message: request, Overrides: &agentv1.RunOverrides{AllowedTools: []string{"calculator"}}})
	if res.GetExitReason() != orchestrator.ExitToolRequired || res.GetContract().GetToolPolicy() != typev1.ToolPolicy_TOOL_POLICY_REQUIRED {
		t.Errorf("allowed: outcome %s %s under tool_policy %s, want TOOL_REQUIRED under required",
			res.GetOutcome(), res.GetExitReason(), res.GetContract().GetToolPolicy())
	}
}

// TestDecideIsAccounted (issue 11.1, 13.1): Decide accounts every LLM request it makes, as a
// run does: the intent model's (stage intent) and each generation attempt, failed ones
// included, with their tokens summed in the decision's usage.
func TestDecideIsAccounted(t *testing.T) {
	const message = "Summarise the Go memory model in one line"
	h := startWith(t, nil, intentModel,
		intentScenario(message, submitIntent(`{"goal": "Summarise the Go memory model", "constraints": ["one line"],
			"task_type": "question", "needs_clarification": false, "unsafe": false}`)),
		llmtest.Scenario{Name: "answer", Match: message, Turns: []llmtest.Turn{
			{Failure: llmtest.FailModelError, FailuresBeforeSuccess: 1, Content: "Synchronise, or races are undefined.",
				Usage: &llmtest.Usage{PromptTokens: 90, CompletionTokens: 10}},
		}},
	)
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: message})
	if err != nil || d.GetResponseText() != "Synchronise, or races are undefined." {
		t.Fatalf("Decide = %v, %v", d, err)
	}
	acc := d.GetAccounting()
	if len(acc) != 3 {
		t.Fatalf("accounting %v, want the intent request and two generation attempts", acc)
	}
	if e := acc[0]; e.GetStage() != "intent" || e.GetModel() != "intent-model" || e.GetTokens().GetTotal() != 240 {
		t.Errorf("intent entry %v", e)
	}
	if e := acc[1]; e.GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_FAILED || e.GetError() == "" || e.GetType() != typev1.AccountingType_ACCOUNTING_TYPE_LLM {
		t.Errorf("failed attempt entry %v", e)
	}
	if e := acc[2]; e.GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK || e.GetTokens().GetTotal() != 100 || e.GetAttempts() != 1 {
		t.Errorf("answer entry %v", e)
	}
	if got := d.GetUsage().GetTotal(); got != 340 {
		t.Errorf("usage %d tokens, want 340", got)
	}
	if n := len(h.llm.Requests()); n != 3 {
		t.Errorf("%d provider requests, want 3: one entry each", n)
	}
}

// TestIntentModelWindow: a message whose request does not fit the intent model's configured
// context window (providers.*.models.*) is sent it cut to fit: its start and its end, cut where
// no UTF-8 sequence is split, and a note between them that says the middle was left out. A
// provider would refuse the whole message (HTTP 400); the stage did not ask the model at all,
// and its rules read the message instead.
func TestIntentModelWindow(t *testing.T) {
	message := "Wie wird das Wetter? " + strings.Repeat("Ich möchte wissen, ob es morgen regnet. ", 150)
	h := startWith(t, nil, func(cfg *config.Config, url string) {
		intentModel(cfg, url)
		p := cfg.Providers["scripted"]
		p.Models = map[string]config.Model{"intent-model": {ContextWindow: 1500, ContextWindowBufferTokens: 100, MaxOutputTokens: 200}}
		cfg.Providers["scripted"] = p
	},
		intentScenario("Wie wird das Wetter? *", submitIntent(`{"goal": "Weather", "constraints": [],
			"task_type": "question", "needs_clarification": false, "unsafe": false}`)),
		llmtest.Scenario{Name: "turn", Match: message, Turns: []llmtest.Turn{text("Sunny.")}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if !res.GetSuccess() {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if p := intentParsed(t, h, res.GetRunId()); p.GetSource() != intent.SourceModel || p.GetGoal() != "Weather" {
		t.Fatalf("intent_parsed source %q goal %q (fallback %q), want the model's", p.GetSource(), p.GetGoal(), p.GetFallbackReason())
	}
	var asked []llmtest.Request
	for _, r := range h.llm.Requests() {
		if len(r.Messages) > 1 && strings.HasPrefix(string(r.Messages[1].Content), intent.ModelInputPrefix) {
			asked = append(asked, r)
		}
	}
	if len(asked) != 1 {
		t.Fatalf("the intent model got %d requests, want 1", len(asked))
	}
	input := string(asked[0].Messages[1].Content)
	body, note, ok := strings.Cut(input, "\n\n[")
	if !ok || !strings.Contains(note, "cut to fit the model's context window") {
		t.Fatalf("the input does not say it was cut: ...%q", input[max(len(input)-200, 0):])
	}
	// The note counts the bytes of the user's message, not of the stage's prefix.
	note, end, _ := strings.Cut(note, "]\n\n")
	shown := len(body) - len(intent.ModelInputPrefix)
	want := fmt.Sprintf("its first %d and last %d of %d bytes are shown",
		shown, len(end), len(message))
	if !strings.Contains(note, want) {
		t.Errorf("the note %q does not say %q", note, want)
	}
	if !utf8.ValidString(body) || !strings.HasPrefix(intent.ModelInputPrefix+message, body) ||
		shown+len(end) >= len(message) {
		t.Errorf("the input is not a start of the message, cut where no character is split: ...%q", body[max(len(body)-40, 0):])
	}
	if !utf8.ValidString(end) || end == "" || !strings.HasSuffix(message, end) {
		t.Errorf("the input does not end with the message's end: %q", end[:min(len(end), 40)])
	}
	msgs := []*typev1.Message{{Content: string(asked[0].Messages[0].Content)}, {Content: input}}
	if n := tokens.ForModel("intent-model").Messages(msgs); n > 1500-100-200 {
		t.Errorf("the request's messages hold %d tokens, over the %d the window leaves", n, 1500-100-200)
	}
}

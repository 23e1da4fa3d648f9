package mesh_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"github.com/agentmesh/agentmesh/services/planning"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// withPlanner configures the planning model "planner" on the scripted provider.
func withPlanner(cfg *config.Config, _ string) {
	cfg.Models.Planning = &config.Target{Provider: "scripted", Model: "planner"}
}

// planner answers the planning model's requests for goal with turn.
func planner(goal string, turn llmtest.Turn) llmtest.Scenario {
	return llmtest.Scenario{Name: "plan " + goal, Match: "Goal: " + goal + "\n*", Turns: []llmtest.Turn{turn}}
}

// submitPlan is the planning model's answer: a call of submit_plan with arguments.
func submitPlan(arguments string) llmtest.Turn {
	return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: planning.PlanTool, Arguments: arguments}}}
}

// toolTurn calls one tool.
func toolTurn(id, name, arguments string) llmtest.Turn {
	return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: id, Name: name, Arguments: arguments}}}
}

// requestsOf are the provider requests whose first user message is first: a run's turns, or
// the planning model's requests for a goal ("Goal: ..." prefix).
func (h *harness) requestsOf(first string, prefix bool) []llmtest.Request {
	var out []llmtest.Request
	for _, req := range h.llm.Requests() {
		for _, m := range req.Messages {
			if m.Role != "user" {
				continue
			}
			if c := string(m.Content); c == first || prefix && strings.HasPrefix(c, first) {
				out = append(out, req)
			}
			break
		}
	}
	return out
}

// systemText is the text of a request's system messages.
func systemText(req llmtest.Request) string {
	var parts []string
	for _, m := range req.Messages {
		if m.Role == "system" {
			parts = append(parts, string(m.Content))
		}
	}
	return strings.Join(parts, "\n")
}

// planEvents are a finished run's plan_created and plan_revised events.
func (h *harness) planEvents(t *testing.T, runID string) (*eventv1.PlanCreated, []*eventv1.PlanRevised) {
	t.Helper()
	evs, _ := h.storedEvents(t, runID)
	var (
		created *eventv1.PlanCreated
		revised []*eventv1.PlanRevised
	)
	for _, ev := range evs {
		if c := ev.GetPlanCreated(); c != nil {
			created = c
		}
		if r := ev.GetPlanRevised(); r != nil {
			revised = append(revised, r)
		}
	}
	return created, revised
}

// planEntries are the details of a run's PLAN transcript entries, by step id.
func planEntries(res *typev1.RunResult) map[string]string {
	out := map[string]string{}
	for _, e := range res.GetTranscript() {
		if e.GetState() == typev1.RunState_RUN_STATE_PLAN {
			out[e.GetStepId()] = e.GetDetail()
		}
	}
	return out
}

func stepIDs(steps []*typev1.Step) []string {
	ids := make([]string, len(steps))
	for i, s := range steps {
		ids[i] = s.GetId()
	}
	return ids
}

// plannerEntries are the accounting entries of the planning model's requests.
func plannerEntries(res *typev1.RunResult) []*typev1.AccountingEntry {
	var out []*typev1.AccountingEntry
	for _, a := range res.GetAccounting() {
		if a.GetStage() == "planning" {
			out = append(out, a)
		}
	}
	return out
}

// TestPlanningModel plans with the planning model: its request carries the goal, the intent's
// task type and the tools, and offers only submit_plan, forced; the run follows its plan, shows
// the model the real progress each turn, and accounts the planner's request.
func TestPlanningModel(t *testing.T) {
	const message = "Read the clock in UTC, then calculate 6*7"
	h := startWith(t, nil, withPlanner,
		planner(message, submitPlan(`{"viable": true, "estimated_steps": 3, "steps": [
			{"id": "clock", "description": "read the clock in UTC", "tool": "current_time"},
			{"id": "product", "description": "multiply 6 by 7", "tool": "calculator", "depends_on": ["clock"]}]}`)),
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
			toolTurn("t1", "current_time", `{"timezone": "UTC"}`), calcTurn("c1", "6*7"), text("It is 42."),
		}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	checkInvariants(t, res)

	asked := h.requestsOf("Goal: "+message+"\n", true)
	if len(asked) != 1 {
		t.Fatalf("%d planning requests, want 1", len(asked))
	}
	req := asked[0]
	if len(req.Tools) != 1 || req.Tools[0].Function.Name != planning.PlanTool || string(req.ToolChoice) != `"required"` || req.Model != "planner" {
		t.Errorf("the planning request offered %+v with tool_choice %s to %s", req.Tools, req.ToolChoice, req.Model)
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(req.Tools[0].Function.Parameters, &schema); err != nil || schema.Properties["steps"] == nil || schema.Properties["viable"] == nil {
		t.Errorf("submit_plan's schema %s (%v)", req.Tools[0].Function.Parameters, err)
	}
	for _, want := range []string{"Task type: ", "Step limit: 20\n", "- calculator: ", "- current_time: "} {
		if !strings.Contains(string(req.Messages[1].Content), want) {
			t.Errorf("the planning input lacks %q:\n%s", want, req.Messages[1].Content)
		}
	}

	created, revised := h.planEvents(t, res.GetRunId())
	if created.GetSource() != "model" || !slices.Equal(stepIDs(created.GetSteps()), []string{"clock", "product"}) || created.GetEstimatedSteps() != 3 || len(revised) != 0 {
		t.Errorf("plan_created %v, plan_revised %v", created, revised)
	}
	if d := planEntries(res)["PLAN"]; !strings.Contains(d, "2 steps by the model, estimated 3 turns") {
		t.Errorf("PLAN entry %q", d)
	}

	turns := h.requestsOf(message, false)
	if len(turns) != 3 {
		t.Fatalf("%d run requests, want 3", len(turns))
	}
	at := []int{0, 1, 1, 1, 2} // the turn each text is in
	for i, want := range []string{
		"Current step clock: read the clock in UTC (tool: current_time)\nPlan progress: 0 of 2 steps done.\n" +
			"- clock [current]: read the clock in UTC (tool: current_time)\n- product [pending, after clock]: multiply 6 by 7 (tool: calculator)",
		"Current step product: multiply 6 by 7 (tool: calculator)\nPlan progress: 1 of 2 steps done.\n" +
			"- clock [done]: read the clock in UTC (tool: current_time) → {\"abbreviation\":\"UTC\",",
		"\"timezone\":\"UTC\",\"weekday\":",
		"}\n- product [current]: multiply 6 by 7 (tool: calculator)",
		"Every step of the plan is done.\nPlan progress: 2 of 2 steps done.",
	} {
		if !strings.Contains(systemText(turns[at[i]]), want) {
			t.Errorf("turn %d's system messages lack %q:\n%s", at[i]+1, want, systemText(turns[at[i]]))
		}
	}

	entries := plannerEntries(res)
	if len(entries) != 1 || entries[0].GetModel() != "planner" || entries[0].GetStatus() != typev1.AccountingStatus_ACCOUNTING_STATUS_OK || entries[0].GetTokens().GetTotal() == 0 {
		t.Fatalf("planning accounting %v", entries)
	}
	var total int64
	for _, a := range res.GetAccounting() {
		if a.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_LLM {
			total += a.GetTokens().GetTotal()
		}
	}
	if res.GetUsage().GetTotal() != total {
		t.Errorf("usage %d tokens, the LLM entries (the planner's included) %d", res.GetUsage().GetTotal(), total)
	}
}

// TestPlanningModelFallback plans by the rules when the planning model answers garbage, names a
// tool that is not available, or fails; the run says so (plan_created's fallback_reason, the
// PLAN entry, a warning) and goes on with the rules' plan.
func TestPlanningModelFallback(t *testing.T) {
	table := []struct {
		message, reason string
		turn            llmtest.Turn
	}{
		{"What is 6 times 7? (garbage)", "do not match its schema", submitPlan(`{"steps": "first multiply"}`)},
		{"What is 6 times 7? (unknown tool)", `step "a" uses tool "abacus", which is not available`,
			submitPlan(`{"viable": true, "steps": [{"id": "a", "description": "multiply", "tool": "abacus"}]}`)},
		{"What is 6 times 7? (planner down)", "the planning model failed", llmtest.Turn{Failure: llmtest.FailModelError}},
	}
	var scenarios []llmtest.Scenario
	for _, tc := range table {
		scenarios = append(scenarios, planner(tc.message, tc.turn),
			llmtest.Scenario{Name: tc.message, Match: tc.message, Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	}
	h := startWith(t, nil, withPlanner, scenarios...)
	for _, tc := range table {
		t.Run(tc.message, func(t *testing.T) {
			res := h.run(t, &agentv1.RunRequest{Message: tc.message})
			if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
				t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
			}
			checkInvariants(t, res)
			created, _ := h.planEvents(t, res.GetRunId())
			if created.GetSource() != "rules" || !strings.Contains(created.GetFallbackReason(), tc.reason) ||
				len(created.GetSteps()) != 1 || created.GetSteps()[0].GetToolName() != "calculator" {
				t.Errorf("plan_created %v, want the rules' plan because %q", created, tc.reason)
			}
			if d := planEntries(res)["PLAN"]; !strings.Contains(d, "by the rules (the planning model's plan is not used: ") {
				t.Errorf("PLAN entry %q", d)
			}
			if len(plannerEntries(res)) != 1 {
				t.Errorf("planning accounting %v, want the planner's request", plannerEntries(res))
			}
		})
	}
	if !strings.Contains(h.logs.String(), "the planning model's plan is not used") {
		t.Error("no warning logged for the fallback")
	}
}

// TestPlanFailuresEndTheRun: the intent's task type, constraints and the configured step limit
// reach planning, so NO_VIABLE_PLAN and PLAN_TOO_COMPLEX end a real run before any LLM turn,
// by the rules and by the planning model.
func TestPlanFailuresEndTheRun(t *testing.T) {
	const (
		noTool    = "Send 17 * 23 to bob@example.com without the calculator"
		tooLong   = "Open the notes, then count the words, then multiply by 2, then report the total"
		moon      = "Book me a flight to the moon"
		manySteps = "Plan the launch party"
	)
	limited := func() *config.Config {
		cfg := config.Default()
		cfg.Defaults.MaxPlanSteps = 3
		return cfg
	}
	rules := start(t, limited())
	model := startWith(t, limited(), withPlanner,
		planner(moon, submitPlan(`{"viable": false, "reason": "no tool books space flights", "steps": []}`)),
		planner(manySteps, submitPlan(`{"viable": true, "steps": [{"id": "a", "description": "venue"}, {"id": "b", "description": "food"},
			{"id": "c", "description": "music"}, {"id": "d", "description": "invitations"}]}`)),
	)
	table := []struct {
		h                             *harness
		message, exit, report, reason string
		allowed                       []string
	}{
		{rules, noTool, orchestrator.ExitNoViablePlan, orchestrator.MessageNoViablePlan, "the constraints rule out every available tool (calculator)", []string{"calculator"}},
		{rules, tooLong, orchestrator.ExitPlanTooComplex, orchestrator.MessageTooComplex, "the goal has 4 steps, the limit is 3", nil},
		{model, moon, orchestrator.ExitNoViablePlan, orchestrator.MessageNoViablePlan, "the planning model found no viable plan: no tool books space flights", nil},
		{model, manySteps, orchestrator.ExitPlanTooComplex, orchestrator.MessageTooComplex, "the planning model's plan has 4 steps, the limit is 3", nil},
	}
	for _, tc := range table {
		t.Run(tc.message, func(t *testing.T) {
			h := tc.h
			res := h.run(t, &agentv1.RunRequest{Message: tc.message, Overrides: &agentv1.RunOverrides{AllowedTools: tc.allowed}})
			if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != tc.exit {
				t.Fatalf("outcome %s %s (%s), want FAILED_PREFLIGHT %s", res.GetOutcome(), res.GetExitReason(), res.GetError().GetMessage(), tc.exit)
			}
			if res.GetFinalReport().GetContent() != tc.report || !strings.Contains(res.GetError().GetMessage(), tc.reason) {
				t.Errorf("report %q, error %q; want %q because %q", res.GetFinalReport().GetContent(), res.GetError().GetMessage(), tc.report, tc.reason)
			}
			if res.GetTurns() != 0 || h.llm != nil && len(h.requestsOf(tc.message, false)) != 0 {
				t.Errorf("%d turns before the plan failed", res.GetTurns())
			}
			wantEntries := 0
			if h == model {
				wantEntries = 1 // the planner's request, which the failure carries
			}
			if len(plannerEntries(res)) != wantEntries {
				t.Errorf("planning accounting %v, want %d entries", plannerEntries(res), wantEntries)
			}
			checkInvariants(t, res)
		})
	}
}

// TestTextRequestsNeedNoTool: a request that text answers is answered even where the run has
// no tool to use, though it opens with an imperative ("list", "show", "calculate", "check"),
// while a request to act outside the conversation still ends the run NO_VIABLE_PLAN before any
// turn (here with an action stage that offers no tool at all; TestPlanFailuresEndTheRun has one
// whose constraint rules out the only tool the run may use). Doing arithmetic without the
// calculator, when the calculator is the only tool, is such a text request.
func TestTextRequestsNeedNoTool(t *testing.T) {
	answered := []string{"List three benefits of exercise", "Show me how closures work", "Calculate 17 * 23",
		"Check my grammar: me go store", "Make a list of five fruits"}
	const withoutCalc = "Calculate 17 * 23 without the calculator"
	var scenarios []llmtest.Scenario
	for _, m := range append(slices.Clone(answered), withoutCalc) {
		scenarios = append(scenarios, llmtest.Scenario{Name: m, Match: m, Turns: []llmtest.Turn{text("Here you are.")}})
	}
	noTools := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{mesh.Action: serveStage(t, mesh.Action, func(g *grpc.Server) {
			actionv1.RegisterActionServiceServer(g, toollessAction{})
		})}
	}, scenarios...)
	calculatorOnly := start(t, nil, scenarios...)
	type runCase struct {
		h       *harness
		message string
		allowed []string
		reason  string // "" for a run that completes
	}
	table := []runCase{
		{noTools, "Delete the file report.txt", nil, `the goal "Delete the file report.txt" is an action that needs a tool but none is available`},
		{noTools, "List the files in ./src", nil, "is an action that needs a tool but none is available"},
		{calculatorOnly, withoutCalc, []string{"calculator"}, ""},
	}
	for _, m := range answered {
		table = append(table, runCase{noTools, m, nil, ""})
	}
	for _, tc := range table {
		t.Run(tc.message, func(t *testing.T) {
			res := tc.h.run(t, &agentv1.RunRequest{Message: tc.message, Overrides: &agentv1.RunOverrides{AllowedTools: tc.allowed}})
			checkInvariants(t, res)
			if tc.reason == "" {
				if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetFinalReport().GetContent() != "Here you are." {
					t.Fatalf("%s %s (%s): %q, want the model's answer", res.GetOutcome(), res.GetExitReason(),
						res.GetError().GetMessage(), res.GetFinalReport().GetContent())
				}
				return
			}
			if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != orchestrator.ExitNoViablePlan ||
				!strings.Contains(res.GetError().GetMessage(), tc.reason) || res.GetTurns() != 0 {
				t.Fatalf("%s %s (%s) after %d turns, want FAILED_PREFLIGHT %s because %q before any turn", res.GetOutcome(),
					res.GetExitReason(), res.GetError().GetMessage(), res.GetTurns(), orchestrator.ExitNoViablePlan, tc.reason)
			}
		})
	}
}

// TestNoToolsConstraint: a user who asks for no tools at all ("without using any tools",
// "don't use tools", "no tools"), or not for the one that would serve ("no calculator"), gets a plan without a tool, not a step with the calculator: the run's
// plan is one reasoning step, which the model's answer does, and an action that needs a tool
// ends the run NO_VIABLE_PLAN before any turn. A tool the constraint excepts ("other than the
// calculator") stays usable.
func TestNoToolsConstraint(t *testing.T) {
	answered := []string{"Calculate 2+2 without using any tools", "What is 6*7? Don't use tools.", "Calculate 17*23, no calculator", "What is 6*7? No tools."}
	var scenarios []llmtest.Scenario
	for _, m := range append(slices.Clone(answered), "What is 6*7? Don't use tools other than the calculator.") {
		scenarios = append(scenarios, llmtest.Scenario{Name: m, Match: m, Turns: []llmtest.Turn{text("Here you are.")}})
	}
	h := start(t, nil, scenarios...)
	for _, m := range answered {
		t.Run(m, func(t *testing.T) {
			res := h.run(t, &agentv1.RunRequest{Message: m})
			checkInvariants(t, res)
			if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetFinalReport().GetContent() != "Here you are." {
				t.Fatalf("%s %s (%s): %q, want the model's answer", res.GetOutcome(), res.GetExitReason(),
					res.GetError().GetMessage(), res.GetFinalReport().GetContent())
			}
			plan := res.GetPlan()
			if len(plan) != 1 || plan[0].GetStep().GetToolName() != "" || plan[0].GetState() != typev1.StepState_STEP_STATE_DONE {
				t.Errorf("plan %v, want one reasoning step, done", plan)
			}
		})
	}
	const excepted = "What is 6*7? Don't use tools other than the calculator."
	t.Run(excepted, func(t *testing.T) {
		res := h.run(t, &agentv1.RunRequest{Message: excepted})
		checkInvariants(t, res)
		if plan := res.GetPlan(); len(plan) != 1 || plan[0].GetStep().GetToolName() != "calculator" {
			t.Errorf("plan %v, want one step with the calculator, the tool the constraint excepts", plan)
		}
	})
	const send = "Send the sum of 2 and 2 to bob@example.com without any tools"
	t.Run(send, func(t *testing.T) {
		res := h.run(t, &agentv1.RunRequest{Message: send})
		checkInvariants(t, res)
		if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != orchestrator.ExitNoViablePlan ||
			!strings.Contains(res.GetError().GetMessage(), "the constraints rule out every available tool") || res.GetTurns() != 0 {
			t.Fatalf("%s %s (%s) after %d turns, want FAILED_PREFLIGHT %s before any turn", res.GetOutcome(), res.GetExitReason(),
				res.GetError().GetMessage(), res.GetTurns(), orchestrator.ExitNoViablePlan)
		}
	})
}

// TestPastedCodeIsOneStep: code pasted into a request is the material of its step, not a
// plan step per statement: a question about 22 lines of C, whose statements end in ";", is
// answered as one reasoning step instead of ending PLAN_TOO_COMPLEX ("the goal has 22
// steps"), while prose clauses still make the steps of a plan.
func TestPastedCodeIsOneStep(t *testing.T) {
	var code strings.Builder
	for i := range 22 {
		fmt.Fprintf(&code, "    total += price[%d] * qty[%d];\n", i, i)
	}
	messages := []string{"Find the bug in this C code:\n" + code.String(), "Why does this not compile?\nint main() {\n" + code.String() + "}\n"}
	var scenarios []llmtest.Scenario
	for i, m := range messages {
		scenarios = append(scenarios, llmtest.Scenario{Name: fmt.Sprint("code ", i), Match: m, Turns: []llmtest.Turn{text("Here you are.")}})
	}
	h := start(t, nil, scenarios...)
	for i, m := range messages {
		t.Run(fmt.Sprint("code ", i), func(t *testing.T) {
			res := h.run(t, &agentv1.RunRequest{Message: m})
			checkInvariants(t, res)
			if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetFinalReport().GetContent() != "Here you are." {
				t.Fatalf("%s %s (%s): %q, want the model's answer", res.GetOutcome(), res.GetExitReason(),
					res.GetError().GetMessage(), res.GetFinalReport().GetContent())
			}
			if plan := res.GetPlan(); len(plan) != 1 || !strings.Contains(plan[0].GetStep().GetDescription(), "total += price[21] * qty[21]") {
				t.Errorf("plan %v, want one step with the whole code", plan)
			}
		})
	}
}

// TestNumberedLinesAreSteps: a request's numbered lines are the steps of its plan; the intent
// stage collapsed the goal's whitespace, line breaks too, so the planning stage saw one line
// and planned one step.
func TestNumberedLinesAreSteps(t *testing.T) {
	const message = "Please:\n1. Explain closures in Go\n2. Explain goroutines\n3. Compare the two"
	h := start(t, nil, llmtest.Scenario{Name: "numbered", Match: message, Turns: []llmtest.Turn{text("Here you are.")}})
	res := h.run(t, &agentv1.RunRequest{Message: message})
	checkInvariants(t, res)
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
		t.Fatalf("%s %s (%s), want the model's answer", res.GetOutcome(), res.GetExitReason(), res.GetError().GetMessage())
	}
	var steps []string
	for _, p := range res.GetPlan() {
		steps = append(steps, p.GetStep().GetDescription())
	}
	if want := []string{"Explain closures in Go", "Explain goroutines", "Compare the two"}; !slices.Equal(steps, want) {
		t.Errorf("plan %q, want %q", steps, want)
	}
}

// TestGivenTextIsOneStep: the text a request gives after a colon ("Summarize this article:
// …") is the material of its step, whatever semicolons and "then"s it holds: a short article
// of 22 clauses is summarized, translated or proofread as one step instead of ending
// PLAN_TOO_COMPLEX, and a step before the material is still a step of its own.
func TestGivenTextIsOneStep(t *testing.T) {
	article := strings.Repeat("The river rose in the night; the village slept, and then the bells rang. ", 11)
	messages := []string{"Summarize this article: " + article, "Translate this into French:\n" + article, "Proofread: " + article,
		"What time is it? Then proofread: " + article}
	var scenarios []llmtest.Scenario
	for i, m := range messages {
		scenarios = append(scenarios, llmtest.Scenario{Name: fmt.Sprint("text ", i), Match: m, Turns: []llmtest.Turn{text("Here you are.")}})
	}
	h := start(t, nil, scenarios...)
	for i, m := range messages {
		t.Run(fmt.Sprint("text ", i), func(t *testing.T) {
			res := h.run(t, &agentv1.RunRequest{Message: m})
			checkInvariants(t, res)
			if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY || res.GetFinalReport().GetContent() != "Here you are." {
				t.Fatalf("%s %s (%s): %q, want the model's answer", res.GetOutcome(), res.GetExitReason(),
					res.GetError().GetMessage(), res.GetFinalReport().GetContent())
			}
			plan, want := res.GetPlan(), 1
			if i == 3 {
				want = 2 // the time, then the proofreading
			}
			if len(plan) != want || !strings.HasSuffix(plan[len(plan)-1].GetStep().GetDescription(), "then the bells rang") {
				t.Errorf("plan %v, want %d steps, the last with the whole text", plan, want)
			}
		})
	}
}

// TestRequiredToolsWithNoToolIsRefused: tool_policy required where the run has no tool to
// use (an action stage that offers none) can never be met, so the run ends FAILED_PREFLIGHT
// INVALID_CONTRACT before any LLM call, whether the policy came from the request or from the
// intent (a code request that names a file), instead of asking the model and ending
// TOOL_REQUIRED.
func TestRequiredToolsWithNoToolIsRefused(t *testing.T) {
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{mesh.Action: serveStage(t, mesh.Action, func(g *grpc.Server) {
			actionv1.RegisterActionServiceServer(g, toollessAction{})
		})}
	}, llmtest.Scenario{Name: "never", Match: "*", Turns: []llmtest.Turn{text("never asked")}})
	for _, tc := range []struct {
		name   string
		req    *agentv1.RunRequest
		reason string
	}{
		{"required by the request", &agentv1.RunRequest{Message: "What is 6*7?", Overrides: &agentv1.RunOverrides{
			ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED}}, "tool_policy required needs a tool the run may use, and none is available"},
		{"required by the intent", &agentv1.RunRequest{Message: "Fix the nil check in handler.go", Surface: typev1.Surface_SURFACE_CODE},
			"tool_policy required (from the intent) needs a tool the run may use, and none is available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantInvalidContract(t, h.run(t, tc.req), tc.reason)
		})
	}
	if n := len(h.llm.Requests()); n != 0 {
		t.Errorf("%d provider requests, want none", n)
	}
}

// toollessAction is an action stage in place of the mesh's that offers no tool.
type toollessAction struct {
	actionv1.UnimplementedActionServiceServer
}

func (toollessAction) ListTools(context.Context, *actionv1.ListToolsRequest) (*actionv1.ListToolsResponse, error) {
	return &actionv1.ListToolsResponse{}, nil
}

// TestReplanAfterFailedStep: a step whose tool fails beyond recovery makes the run revise its
// plan before the next turn (a plan_revised event, a PLAN entry); the revised plan does not
// give the step the tool that failed, the model sees the real progress, and the run completes.
func TestReplanAfterFailedStep(t *testing.T) {
	const message = "Check the time on Mars, then calculate 6*7"
	turns := []llmtest.Turn{
		toolTurn("t1", "current_time", `{"timezone": "Mars/Olympus_Mons"}`),
		calcTurn("c1", "6*7"),
		text("No clock knows Mars; 6*7 is 42."),
	}
	for _, tc := range []struct {
		name   string
		tweak  func(*config.Config, string)
		source string
	}{
		{"by the rules", nil, "rules"},
		{"by the planning model", withPlanner, "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startWith(t, nil, tc.tweak,
				llmtest.Scenario{Name: "plan", Match: "Goal: " + message + "\n*", Turns: []llmtest.Turn{{Respond: func(req llmtest.Request, _ int) llmtest.Turn {
					if strings.Contains(string(req.Messages[1].Content), "The plan so far:") {
						return submitPlan(`{"viable": true, "steps": [
							{"id": "step-1", "description": "Say that no clock knows Mars time"},
							{"id": "step-2", "description": "calculate 6*7", "tool": "calculator", "depends_on": ["step-1"]}]}`)
					}
					return submitPlan(`{"viable": true, "steps": [
						{"id": "step-1", "description": "Check the time on Mars", "tool": "current_time"},
						{"id": "step-2", "description": "calculate 6*7", "tool": "calculator", "depends_on": ["step-1"]}]}`)
				}}}},
				llmtest.Scenario{Name: "run", Match: message, Turns: turns},
			)
			res := h.run(t, &agentv1.RunRequest{Message: message})
			if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
				t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
			}
			checkInvariants(t, res)
			created, revised := h.planEvents(t, res.GetRunId())
			if created.GetSteps()[0].GetToolName() != "current_time" || len(revised) != 1 {
				t.Fatalf("plan_created %v, plan_revised %v", created, revised)
			}
			r := revised[0]
			if r.GetRevision() != 1 || r.GetSource() != tc.source || !strings.Contains(r.GetReason(), "step step-1 (current_time) failed: ") ||
				!strings.Contains(r.GetReason(), "unknown timezone") {
				t.Errorf("plan_revised %v", r)
			}
			if s := r.GetSteps(); len(s) != 2 || s[0].GetStep().GetToolName() != "" || s[0].GetState() != typev1.StepState_STEP_STATE_PENDING ||
				s[1].GetStep().GetToolName() != "calculator" {
				t.Errorf("revised steps %v: step-1 must go without current_time", s)
			}
			if d := planEntries(res)["turn-1/PLAN"]; !strings.Contains(d, "revision 1 (step step-1 (current_time) failed: ") {
				t.Errorf("the revision's PLAN entry %q (entries %v)", d, planEntries(res))
			}
			reqs := h.requestsOf(message, false)
			if len(reqs) != 3 {
				t.Fatalf("%d run requests, want 3", len(reqs))
			}
			if got := systemText(reqs[1]); !strings.Contains(got, "Current step step-1: ") || !strings.Contains(got, "Plan progress: 0 of 2 steps done.") {
				t.Errorf("turn 2 did not see the revised plan:\n%s", got)
			}
			if got := systemText(reqs[2]); !strings.Contains(got, "Every step of the plan is done.") {
				t.Errorf("turn 3 did not see the plan done:\n%s", got)
			}
			if tc.source == "model" {
				revision := h.requestsOf("Goal: "+message+"\n", true)[1]
				if in := string(revision.Messages[1].Content); !strings.Contains(in, "- step-1 [failed: ") || !strings.Contains(in, "Revise it because: step step-1 (current_time) failed") {
					t.Errorf("the revision request:\n%s", in)
				}
			}
		})
	}
}

// TestReplanBound: revisions stop at defaults.max_replans; a PLAN entry says why the plan
// stays as it is, and the run goes on. A call of a tool no step uses (the model leaving the
// plan) is a reason to revise too, and joins the plan as a step of its own.
func TestReplanBound(t *testing.T) {
	const message = "What time is it in Tokyo?"
	cfg := config.Default()
	cfg.Defaults.MaxReplans = 1
	h := start(t, cfg, llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
		calcTurn("c1", "9/3"), // leaves the plan: revision 1
		toolTurn("t1", "current_time", `{"timezone": "Tokyo/Nowhere"}`), // step-1 fails: over the bound
		text("It is late in Tokyo."),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	checkInvariants(t, res)
	_, revised := h.planEvents(t, res.GetRunId())
	if len(revised) != 1 || revised[0].GetReason() != "the model called calculator, which no step of the plan uses" {
		t.Fatalf("plan_revised %v, want the one revision for the call outside the plan", revised)
	}
	if s := revised[0].GetSteps(); len(s) != 2 || s[0].GetStep().GetId() != "unplanned-1" || s[0].GetState() != typev1.StepState_STEP_STATE_DONE ||
		s[1].GetStep().GetToolName() != "current_time" {
		t.Errorf("revised steps %v: the calculator call comes in as a done step", s)
	}
	entries := planEntries(res)
	if d := entries["turn-2/PLAN"]; !strings.Contains(d, "not revised: step step-1 (current_time) failed: ") ||
		!strings.Contains(d, "the plan was revised 1 times, the limit (defaults.max_replans) is 1") {
		t.Errorf("the bound's PLAN entry %q (entries %v)", d, entries)
	}
	if got := systemText(h.requestsOf(message, false)[2]); !strings.Contains(got, "- step-1 [failed: unknown timezone") {
		t.Errorf("turn 3 did not see the failed step:\n%s", got)
	}
}

// pausedOn polls GetRun through c until the run waits for the approval of callID alone.
func pausedOn(t *testing.T, c agentv1.AgentServiceClient, runID, callID string) *typev1.RunResult {
	t.Helper()
	var res *typev1.RunResult
	if !eventually(t, 30*time.Second, func() bool {
		r, err := c.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: runID})
		if err != nil {
			return false
		}
		res = r
		calls := r.GetPendingAction().GetToolCalls()
		return r.GetOutcome() == typev1.Outcome_OUTCOME_AWAITING_APPROVAL && len(calls) == 1 && calls[0].GetId() == callID
	}) {
		t.Fatalf("run %s did not pause for %s: %v", runID, callID, res)
	}
	return res
}

// TestPlanApproval: with tools.approve_plans, a plan that requires human approval pauses the
// run before its first turn, for the pseudo call "plan" whose arguments are the steps.
// Approving goes on (each call still waits for its own approval); a rejection that ends runs
// ends this one; another drops the plan; a plan cannot be modified.
func TestPlanApproval(t *testing.T) {
	const message = "What is 6 times 7?"
	cfg := config.Default()
	cfg.Tools.ApprovePlans = true
	cfg.Tools.RequireApproval = []string{"calculator"}
	h := start(t, cfg, llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	pausedOnPlan := func(t *testing.T) *typev1.RunResult {
		t.Helper()
		res := h.run(t, &agentv1.RunRequest{Message: message})
		paused(t, res, orchestrator.PlanCallID)
		call := res.GetPendingAction().GetToolCalls()[0]
		steps := call.GetArguments().GetFields()["steps"].GetListValue().GetValues()
		if call.GetName() != "plan" || len(steps) != 1 || steps[0].GetStructValue().GetFields()["tool"].GetStringValue() != "calculator" {
			t.Errorf("pending call %v", call)
		}
		if res.GetTurns() != 0 {
			t.Errorf("the run paused after %d turns, want before the first", res.GetTurns())
		}
		return res
	}
	decide := func(runID string, d agentv1.ApprovalDecision, endRun *bool) {
		h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: runID, CallId: orchestrator.PlanCallID, Decision: d, EndRun: endRun, Feedback: "too risky"})
	}

	t.Run("approved", func(t *testing.T) {
		res := pausedOnPlan(t)
		_, err := h.client.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: orchestrator.PlanCallID,
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_MODIFY, ModifiedArguments: mustStruct(t, map[string]any{"steps": []any{}})})
		wantCode(t, err, codes.InvalidArgument, "modifying the plan")
		decide(res.GetRunId(), agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE, nil)
		pausedOn(t, h.client, res.GetRunId(), "c1") // the call waits for its own approval
		h.resolve(t, &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE})
		final, kinds := h.finish(t, res.GetRunId())
		if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
			t.Fatalf("outcome %s %s", final.GetOutcome(), final.GetExitReason())
		}
		if count(kinds, "approval_requested") != 2 || !slices.ContainsFunc(final.GetTranscript(), func(e *typev1.TranscriptEntry) bool {
			return e.GetStepId() == "AWAIT_APPROVAL/plan"
		}) {
			t.Errorf("events %v; no AWAIT_APPROVAL/plan entry", kinds)
		}
		checkInvariants(t, final)
	})
	t.Run("rejected, ending the run", func(t *testing.T) {
		res := pausedOnPlan(t)
		endRun := true
		decide(res.GetRunId(), agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, &endRun)
		final, _ := h.finish(t, res.GetRunId())
		if final.GetOutcome() != typev1.Outcome_OUTCOME_REJECTED || final.GetExitReason() != orchestrator.ExitUserRejected ||
			final.GetFinalReport().GetContent() != `The plan was rejected, so nothing more was carried out and the run stopped. The reason given: "too risky".` {
			t.Fatalf("outcome %s %s, report %q", final.GetOutcome(), final.GetExitReason(), final.GetFinalReport().GetContent())
		}
		checkInvariants(t, final)
	})
	t.Run("not decided in time", func(t *testing.T) {
		res := h.run(t, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{ApprovalTimeoutMs: proto.Int64(1)}})
		final, _ := h.finish(t, res.GetRunId())
		if final.GetOutcome() != typev1.Outcome_OUTCOME_REJECTED || final.GetExitReason() != orchestrator.ExitApprovalTimeout {
			t.Fatalf("outcome %s %s", final.GetOutcome(), final.GetExitReason())
		}
		checkInvariants(t, final)
	})
	t.Run("rejected, going on without a plan", func(t *testing.T) {
		before := len(h.requestsOf(message, false))
		res := pausedOnPlan(t)
		endRun := false
		decide(res.GetRunId(), agentv1.ApprovalDecision_APPROVAL_DECISION_REJECT, &endRun)
		final := pausedOn(t, h.client, res.GetRunId(), "c1")
		if got := systemText(h.requestsOf(message, false)[before]); strings.Contains(got, "Current step") {
			t.Errorf("the model still saw the rejected plan:\n%s", got)
		}
		if d := planEntries(final)["PLAN/rejected"]; d != "the plan was rejected: too risky; the run goes on without a plan" {
			t.Errorf("PLAN/rejected entry %q", d)
		}
		_, err := h.client.CancelRun(t.Context(), &agentv1.CancelRunRequest{RunId: res.GetRunId()})
		if err != nil {
			t.Fatal(err)
		}
		h.finish(t, res.GetRunId())
	})
}

// TestPlanTrackerSurvivesResume: a run handed off to another replica while it waits for a
// call's approval goes on with its plan's progress and revisions as they were (the checkpoint
// holds them): the revision bound still counts the revision made before the hand-off.
func TestPlanTrackerSurvivesResume(t *testing.T) {
	const message = "Check the time on Mars, then calculate 6*7"
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"calculator"}
	cfg.Durability.LeaseTTLMS = 1000
	cfg.Defaults.MaxReplans = 1
	h := startReplicas(t, cfg, 2, nil, llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
		toolTurn("t1", "current_time", `{"timezone": "Mars/Olympus_Mons"}`), // step-1 fails: revision 1
		calcTurn("c1", "1/0"), // waits for approval; after the hand-off, step-2 fails
		text("No clock knows Mars, and 1/0 has no value."),
	}})
	a, b := h.replicas[0], h.replicas[1]
	res, err := a.Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, "c1")
	h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0)
	if _, err := b.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: "c1", Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
		t.Fatal(err)
	}
	final, kinds := finishOn(t, b, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || count(kinds, "run_resumed") != 1 {
		t.Fatalf("outcome %s %s, events %v", final.GetOutcome(), final.GetExitReason(), kinds)
	}
	checkInvariants(t, final)
	if n := count(kinds, "plan_revised"); n != 1 {
		t.Errorf("%d plan_revised events, want the one before the hand-off (max_replans 1)", n)
	}
	if d := planEntries(final)["turn-2/PLAN"]; !strings.Contains(d, "not revised: step step-2 (calculator) failed: division by zero") ||
		!strings.Contains(d, "the plan was revised 1 times") {
		t.Errorf("the PLAN entry after the hand-off %q", d)
	}
	reqs := h.requestsOf(message, false)
	if got := systemText(reqs[len(reqs)-1]); !strings.Contains(got, "- step-1 [done]: ") || !strings.Contains(got, "- step-2 [failed: division by zero") {
		t.Errorf("the last turn, on the other replica, saw:\n%s", got)
	}
}

// TestPlanApprovalOnAnotherReplica: the pause for the plan is checkpointed like a call's: when
// its replica stops, the other one adopts the run, takes the decision and goes on.
func TestPlanApprovalOnAnotherReplica(t *testing.T) {
	const message = "What is 6 times 7?"
	cfg := config.Default()
	cfg.Tools.ApprovePlans = true
	cfg.Tools.RequireApproval = []string{"calculator"}
	cfg.Durability.LeaseTTLMS = 1000
	h := startReplicas(t, cfg, 2, nil, llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{calcTurn("c1", "6*7"), text("42")}})
	a, b := h.replicas[0], h.replicas[1]
	res, err := a.Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, orchestrator.PlanCallID)
	h.mesh.StopOrchestrator(context.WithoutCancel(t.Context()), 0)
	for _, id := range []string{orchestrator.PlanCallID, "c1"} {
		pausedOn(t, b, res.GetRunId(), id)
		if _, err := b.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: id, Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
			t.Fatal(err)
		}
	}
	final, kinds := finishOn(t, b, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || count(kinds, "run_resumed") != 1 {
		t.Fatalf("outcome %s %s, events %v", final.GetOutcome(), final.GetExitReason(), kinds)
	}
	if got := systemText(h.requestsOf(message, false)[0]); !strings.Contains(got, "Current step step-1: ") {
		t.Errorf("the first turn, after the hand-off, did not see the plan:\n%s", got)
	}
	checkInvariants(t, final)
}

// TestStepsKeepTheirResults (issue 13.2, 13.3): the observation stage's structured data feeds
// the step tracker: a done step keeps its tool's parsed JSON result, the model's next turn
// sees it with the step, and the run's result carries the plan with each step's state and
// output. A result the observation stage cannot observe fails its step, though the tool
// succeeded.
func TestStepsKeepTheirResults(t *testing.T) {
	const message = "How warm is it, doubled?"
	tools := staticTools(t, map[string]string{"weather": `{"temperature": 21.5, "sky": "clear"}`, "broken": "Sunny."})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"weather": {Description: "The weather as JSON.", URL: tools.URL + "/weather"},
		"weather_strict": {Description: "The weather, checked against its schema.", URL: tools.URL + "/broken",
			OutputSchema: map[string]any{"type": "object", "required": []any{"temperature"}}},
	}
	plan := func(tool string) llmtest.Turn {
		return submitPlan(`{"viable": true, "steps": [
			{"id": "step-1", "description": "Read the weather", "tool": "` + tool + `"},
			{"id": "step-2", "description": "Double the temperature", "tool": "calculator", "depends_on": ["step-1"]}]}`)
	}
	const strict = "How warm is it, strictly?"
	h := startWith(t, cfg, withPlanner,
		planner(message, plan("weather")),
		planner(strict, plan("weather_strict")),
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
			toolTurn("w1", "weather", `{}`), calcTurn("c1", "21.5*2"), text("43 degrees, doubled."),
		}},
		llmtest.Scenario{Name: "strict", Match: strict, Turns: []llmtest.Turn{toolTurn("w1", "weather_strict", `{}`), text("never asked")}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	checkInvariants(t, res)
	const line = `- step-1 [done]: Read the weather (tool: weather) → {"sky":"clear","temperature":21.5}`
	if got := systemText(h.requestsOf(message, false)[1]); !strings.Contains(got, line) {
		t.Errorf("turn 2 does not show step-1's result %q:\n%s", line, got)
	}
	steps := res.GetPlan()
	if len(steps) != 2 || steps[0].GetState() != typev1.StepState_STEP_STATE_DONE || steps[1].GetState() != typev1.StepState_STEP_STATE_DONE {
		t.Fatalf("the result's plan %v, want both steps done", steps)
	}
	if out := steps[0].GetOutput().AsMap(); out["temperature"] != 21.5 || out["sky"] != "clear" {
		t.Errorf("step-1's output %v", out)
	}
	if steps[1].GetOutput() != nil {
		t.Errorf("step-2's output %v: the calculator's result is not structured", steps[1].GetOutput())
	}

	t.Run("an unobservable result", func(t *testing.T) {
		res := h.run(t, &agentv1.RunRequest{Message: strict})
		if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_VALIDATION {
			t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
		}
		if s := res.GetPlan(); len(s) != 2 || s[0].GetState() != typev1.StepState_STEP_STATE_FAILED || s[0].GetNote() != "the result could not be observed" ||
			s[1].GetState() != typev1.StepState_STEP_STATE_PENDING {
			t.Errorf("the result's plan %v, want step-1 failed: not observed", s)
		}
	})
}

// TestARevisionKeepsADoneStepsOutput: a plan revised after a step was done keeps the step done
// with its output (README: a done step carries its output, which the model sees in the plan's
// progress each turn; steps done stay done). The revision kept the state and dropped the
// output: gone from plan_revised, from RunResult.plan and from what the model saw.
func TestARevisionKeepsADoneStepsOutput(t *testing.T) {
	const message = "How warm is it, doubled?"
	tools := staticTools(t, map[string]string{"weather": `{"temperature": 21.5, "sky": "clear"}`})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"weather": {Description: "The weather as JSON.", URL: tools.URL + "/weather"}}
	h := startWith(t, cfg, withPlanner,
		planner(message, submitPlan(`{"viable": true, "steps": [
			{"id": "step-1", "description": "Read the weather", "tool": "weather"},
			{"id": "step-2", "description": "Double the temperature", "tool": "calculator", "depends_on": ["step-1"]}]}`)),
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
			toolTurn("w1", "weather", `{}`),
			toolTurn("t1", "current_time", `{"timezone": "UTC"}`), // outside the plan: a revision
			calcTurn("c1", "21.5*2"),
			text("43 degrees, doubled."),
		}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	_, revised := h.planEvents(t, res.GetRunId())
	if len(revised) != 1 {
		t.Fatalf("plan_revised %v, want one", revised)
	}
	for _, steps := range [][]*typev1.StepProgress{revised[0].GetSteps(), res.GetPlan()} {
		for _, s := range steps {
			if s.GetStep().GetId() == "step-1" && (s.GetState() != typev1.StepState_STEP_STATE_DONE || s.GetOutput() == nil) {
				t.Errorf("step-1 after the revision %v: want done, with its output", s)
			}
		}
	}
	const line = `- step-1 [done]: Read the weather (tool: weather) → {"sky":"clear","temperature":21.5}`
	if got := systemText(h.requestsOf(message, false)[2]); !strings.Contains(got, line) {
		t.Errorf("turn 3 does not show step-1's output %q:\n%s", line, got)
	}
}

// TestARevisedPlanWaitsForItsOwnApproval: a revised plan that requires approval pauses the
// run for the pseudo call "plan" again. The decision on the first plan stayed recorded under
// the run and "plan", so the tenant's approver deciding the revised one was told it was
// already decided (FAILED_PRECONDITION), and the run could only wait for its approval timeout
// and end rejected. Each plan pause takes a decision of its own.
func TestARevisedPlanWaitsForItsOwnApproval(t *testing.T) {
	const message = "What is 6 times 7?"
	cfg := config.Default()
	cfg.Tools.ApprovePlans = true
	cfg.Tools.RequireApproval = []string{"calculator"}
	keys := withKeys(cfg)
	h := start(t, cfg, llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
		toolTurn("t1", "current_time", `{"timezone": "UTC"}`), // leaves the plan: a revision
		calcTurn("c1", "6*7"), text("42"),
	}})
	addr := h.mesh.Addr(mesh.Orchestrator)
	alice, ann := keyClient(t, addr, keys["alice"]), keyClient(t, addr, keys["ann"])
	res, err := alice.Run(t.Context(), &agentv1.RunRequest{Message: message})
	if err != nil {
		t.Fatal(err)
	}
	paused(t, res, orchestrator.PlanCallID)
	approve := func(callID string) {
		t.Helper()
		if _, err := ann.ResolveApproval(t.Context(), &agentv1.ResolveApprovalRequest{RunId: res.GetRunId(), CallId: callID,
			Decision: agentv1.ApprovalDecision_APPROVAL_DECISION_APPROVE}); err != nil {
			t.Fatalf("ann approves %s: %v", callID, err)
		}
	}
	approve(orchestrator.PlanCallID)
	var revised *typev1.RunResult
	if !eventually(t, 30*time.Second, func() bool {
		r, err := alice.GetRun(t.Context(), &agentv1.GetRunRequest{RunId: res.GetRunId()})
		revised = r
		return err == nil && r.GetTurns() == 1 && r.GetOutcome() == typev1.Outcome_OUTCOME_AWAITING_APPROVAL
	}) {
		t.Fatalf("the revised plan did not pause the run: %v", revised.GetOutcome())
	}
	paused(t, revised, orchestrator.PlanCallID)
	approve(orchestrator.PlanCallID) // the revised plan
	pausedOn(t, alice, res.GetRunId(), "c1")
	approve("c1")
	final := h.followAs(t, alice, res.GetRunId())
	if final.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s", final.GetOutcome(), final.GetExitReason())
	}
	checkInvariants(t, final)
}

package mesh_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/tokens"
)

// guards returns the context guard evaluations a run published.
func (h *harness) guards(t *testing.T, runID string) []*eventv1.ContextGuardEvaluated {
	t.Helper()
	evs, _ := h.storedEvents(t, runID)
	var out []*eventv1.ContextGuardEvaluated
	for _, ev := range evs {
		if g := ev.GetContextGuard(); g != nil {
			out = append(out, g)
		}
	}
	return out
}

// TestGuardCountsWithoutUsage: a provider that reports no usage (a local server may stream
// none) leaves the guard to count the conversation itself; ctx stayed 0, and a run's context
// could fill without the guard ever forcing a final turn.
func TestGuardCountsWithoutUsage(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "no usage", Match: "count without usage", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression":"1+1"}`}}, Usage: &llmtest.Usage{}},
		text("2"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "count without usage"})
	gs := h.guards(t, res.GetRunId())
	if len(gs) != 2 {
		t.Fatalf("%d guard evaluations, want one per turn", len(gs))
	}
	// Turn 2's ctx is what turn 1 sent (its pending messages) and the answer that came back.
	sent := gs[0].GetReport().GetCounters().GetPending()
	if c := gs[1].GetReport().GetCounters().GetCtx(); c <= sent || c > sent+50 {
		t.Errorf("turn 2 ctx %d, want a little more than the %d tokens turn 1 sent", c, sent)
	}
}

func TestGuardCountsFromZero(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "two turns", Match: "count my tokens", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "calculator", Arguments: `{"expression":"1+1"}`}}, Usage: &llmtest.Usage{PromptTokens: 300, CompletionTokens: 20, CachedTokens: 5}},
		text("2"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "count my tokens"})
	gs := h.guards(t, res.GetRunId())
	if len(gs) != 2 {
		t.Fatalf("%d guard evaluations, want one per turn", len(gs))
	}
	if c := gs[0].GetReport().GetCounters(); gs[0].GetTurn() != 1 || c.GetCtx() != 0 || c.GetPending() == 0 || c.GetSchema() == 0 {
		t.Errorf("turn 1 counters %v: ctx must be 0, pending and schema counted", c)
	}
	// ctx is the previous response's prompt and completion tokens (seed 000 §2: input, output
	// and cache reads, its input the uncached part): the 5 cached tokens are among the 300 of
	// the prompt, and counted once.
	if c := gs[1].GetReport().GetCounters(); c.GetCtx() != 320 {
		t.Errorf("turn 2 ctx %d, want 320", c.GetCtx())
	}
	for _, g := range gs {
		r := g.GetReport()
		if r.GetVerdict() != typev1.GuardVerdict_GUARD_VERDICT_OK || r.GetLimit() != 131072-2048-4096 || r.GetTrigger() != "turn_preflight" {
			t.Errorf("guard %v", r)
		}
	}
}

func TestGuardDropsAToolResultThatWouldOverflow(t *testing.T) {
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("data ", 2000))) // 10 000 bytes ≈ 2 500 tokens
	}))
	t.Cleanup(big.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"fetch_report": {Description: "Fetches the report.", URL: big.URL}}
	h := start(t, cfg, llmtest.Scenario{Name: "overflow", Match: "fetch the report", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "a", Name: "fetch_report", Arguments: `{}`}, {ID: "b", Name: "calculator", Arguments: `{"expression":"1+1"}`}}},
		text("the report is too large to read"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "fetch the report", Overrides: &agentv1.RunOverrides{
		ContextWindow: i64(2000), ContextWindowBufferTokens: i64(0), MaxOutputTokens: i64(200), ToolResponseMaxBytes: i64(0),
	}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if a, b := toolMessage(t, res, 0), toolMessage(t, res, 1); a != "(tool failed: context window budget exceeded)" || b != "(tool failed: not run: the context window budget is exhausted)" {
		t.Errorf("tool messages %q, %q", a, b)
	}
	if got := accountingSummary(res.GetAccounting()); got != "LLM:OK TOOL:FAILED LLM:OK" {
		t.Errorf("accounting %s: the dropped result is a failed entry, the refused call runs nothing", got)
	}
	if e := res.GetAccounting()[1].GetError(); !strings.Contains(e, "context window budget exceeded") {
		t.Errorf("tool accounting error %q", e)
	}
	reqs := h.llm.Requests()
	if got := reqs[1].ToolNames(); !slices.Equal(got, []string{"final_report"}) {
		t.Errorf("the final turn offered %v, want only final_report", got)
	}
	for _, m := range reqs[1].Messages {
		if strings.Contains(string(m.Content), "data data") {
			t.Fatal("the dropped tool result reached the model")
		}
	}
	var preflight bool
	for _, g := range h.guards(t, res.GetRunId()) {
		if r := g.GetReport(); r.GetTrigger() == "tool_preflight" {
			preflight = r.GetVerdict() == typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL && r.GetProjected() > r.GetLimit() && r.GetCounters().GetNew() > 2000
		}
	}
	if !preflight {
		t.Error("no tool_preflight guard event forcing the final turn")
	}
	if got := h.turnStarts(t, res.GetRunId()); !slices.Equal(got, []string{"1:", "2:context"}) {
		t.Errorf("turn_started events %v", got)
	}
	checkInvariants(t, res)
}

func TestGuardForcesTheFinalTurnAtRatio(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "ratio", Match: "summarise now", Turns: []llmtest.Turn{text("summary")}})
	res := h.run(t, &agentv1.RunRequest{Message: "summarise now", Overrides: &agentv1.RunOverrides{ForceSynthesisAtRatio: func() *float64 { v := 0.0001; return &v }()}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	if got := h.llm.Requests()[0].ToolNames(); !slices.Equal(got, []string{"final_report"}) {
		t.Errorf("forced final turn offered %v", got)
	}
	gs := h.guards(t, res.GetRunId())
	if len(gs) != 2 || gs[0].GetReport().GetReason() != "force_synthesis_at_ratio" || !strings.Contains(gs[1].GetReport().GetReason(), "final_report") {
		t.Errorf("guard events %v", gs)
	}
	if gs[1].GetReport().GetCounters().GetSchema() >= gs[0].GetReport().GetCounters().GetSchema() {
		t.Errorf("schema tokens were not recomputed for the reduced tool set: %d then %d",
			gs[0].GetReport().GetCounters().GetSchema(), gs[1].GetReport().GetCounters().GetSchema())
	}
}

// TestGuardUsesTheSmallestTargetWindow: with several targets, the contract takes the
// limits of the target with the smallest usable window, so no attempt exceeds any target.
func TestGuardUsesTheSmallestTargetWindow(t *testing.T) {
	h := startWith(t, nil, func(cfg *config.Config, url string) {
		cfg.Providers["scripted2"] = config.Provider{Type: "openai", BaseURL: url, Models: map[string]config.Model{
			"small": {ContextWindow: 8192, ContextWindowBufferTokens: 256, MaxOutputTokens: 1024},
		}}
		cfg.Targets = append(cfg.Targets, config.Target{Provider: "scripted2", Model: "small"})
	}, llmtest.Scenario{Name: "targets", Match: "hi", Turns: []llmtest.Turn{text("hello")}})
	res := h.run(t, &agentv1.RunRequest{Message: "hi"})
	c := res.GetContract()
	if c.GetContextWindow() != 8192 || c.GetContextWindowBufferTokens() != 256 || c.GetMaxOutputTokens() != 1024 {
		t.Errorf("contract limits %d/%d/%d, want the small model's", c.GetContextWindow(), c.GetContextWindowBufferTokens(), c.GetMaxOutputTokens())
	}
	if gs := h.guards(t, res.GetRunId()); len(gs) == 0 || gs[0].GetReport().GetLimit() != 8192-256-1024 {
		t.Errorf("guard limit %v", gs)
	}
}

// TestOverriddenTargetsTakeTheirModelsWindow: a run whose overrides name other targets gets
// the context limits configured for their models, as the configured targets do (the tightest
// of them); a limit the request overrides as well is the request's.
func TestOverriddenTargetsTakeTheirModelsWindow(t *testing.T) {
	h := startWith(t, nil, func(cfg *config.Config, url string) {
		cfg.Providers["scripted2"] = config.Provider{Type: "openai", BaseURL: url, Models: map[string]config.Model{
			"small": {ContextWindow: 8192, ContextWindowBufferTokens: 256, MaxOutputTokens: 1024},
			"tiny":  {ContextWindow: 6000, MaxOutputTokens: 512},
		}}
	}, llmtest.Scenario{Name: "targets", Match: "hi*", Turns: []llmtest.Turn{text("hello")}})
	small := &typev1.Target{Provider: "scripted2", Model: "small"}
	tiny := &typev1.Target{Provider: "scripted2", Model: "tiny"}
	d := config.Default().Defaults
	cases := []struct {
		name                     string
		overrides                *agentv1.RunOverrides
		window, buffer, maxOuput int64
	}{
		{"one target", &agentv1.RunOverrides{Targets: []*typev1.Target{small}}, 8192, 256, 1024},
		{"the tightest target", &agentv1.RunOverrides{Targets: []*typev1.Target{small, tiny}},
			6000, d.ContextWindowBufferTokens, 512},
		{"a model without limits takes the defaults", &agentv1.RunOverrides{Targets: []*typev1.Target{{Provider: "scripted", Model: "other"}}},
			d.ContextWindow, d.ContextWindowBufferTokens, d.MaxOutputTokens},
		{"the request's own limit wins", &agentv1.RunOverrides{Targets: []*typev1.Target{small}, MaxOutputTokens: i64(512)},
			8192, 256, 512},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := h.run(t, &agentv1.RunRequest{Message: "hi " + tc.name, Overrides: tc.overrides})
			if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
				t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
			}
			c := res.GetContract()
			if c.GetContextWindow() != tc.window || c.GetContextWindowBufferTokens() != tc.buffer || c.GetMaxOutputTokens() != tc.maxOuput {
				t.Errorf("contract limits %d/%d/%d, want %d/%d/%d", c.GetContextWindow(), c.GetContextWindowBufferTokens(),
					c.GetMaxOutputTokens(), tc.window, tc.buffer, tc.maxOuput)
			}
		})
	}
}

// TestAlternativeToolAfterAFailure: a tool that fails is replaced by its configured
// alternative, as the recovery stage decides (seed 003: tool error → try alternative tool).
func TestAlternativeToolAfterAFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/primary" {
			http.Error(w, "the primary index is down", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("backup answer"))
	}))
	t.Cleanup(srv.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"primary_lookup": {Description: "Looks things up.", URL: srv.URL + "/primary"},
		"backup_lookup":  {Description: "Looks things up elsewhere.", URL: srv.URL + "/backup"},
	}
	cfg.Tools.Alternatives = map[string][]string{"primary_lookup": {"backup_lookup"}}
	h := start(t, cfg, llmtest.Scenario{Name: "alt", Match: "look it up", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "primary_lookup", Arguments: `{}`}}}, text("found it"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "look it up"})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s", res.GetOutcome(), res.GetExitReason())
	}
	got := toolMessage(t, res, 0)
	if !strings.Contains(got, "primary_lookup failed") || !strings.Contains(got, "alternative tool backup_lookup") || !strings.HasSuffix(got, "backup answer") {
		t.Errorf("tool message %q", got)
	}
	if got := accountingSummary(res.GetAccounting()); got != "LLM:OK TOOL:FAILED TOOL:OK LLM:OK" {
		t.Errorf("accounting %s", got)
	}
	evs, _ := h.storedEvents(t, res.GetRunId())
	var decided bool
	for _, ev := range evs {
		if d := ev.GetRecoveryDecided(); d != nil && d.GetStage() == "action" && d.GetStrategy() == "fallback" {
			decided = true
		}
	}
	if !decided {
		t.Error("no recovery_decided event for the failed tool")
	}
}

// TestARefusedAlternativeLeavesTheFailedCall: a tool that ran and failed stays the call the run
// made when its alternative is refused by the action stage (here its arguments do not fit
// the alternative): the run counts the executed call, a required tool policy is met by it, and
// the model sees its own call's failure, with a note on the alternative. The refused
// alternative's result stood in for the call, which then counted as never run.
func TestARefusedAlternativeLeavesTheFailedCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/primary" {
			http.Error(w, "the primary index is down", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("backup answer"))
	}))
	t.Cleanup(srv.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"primary_lookup": {Description: "Looks things up.", URL: srv.URL + "/primary"},
		"backup_lookup":  {Description: "Looks a query up elsewhere.", URL: srv.URL + "/backup?q=${parameters.q}"},
	}
	cfg.Tools.Alternatives = map[string][]string{"primary_lookup": {"backup_lookup"}}
	h := start(t, cfg, llmtest.Scenario{Name: "alt", Match: "look it up", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "primary_lookup", Arguments: `{}`}}}, text("it is down"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "look it up",
		Overrides: &agentv1.RunOverrides{ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_REQUIRED}})
	if res.GetToolCalls() != 1 || res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Errorf("tool_calls %d, outcome %s %s; want the primary's call counted", res.GetToolCalls(), res.GetOutcome(), res.GetExitReason())
	}
	got := toolMessage(t, res, 0)
	if !strings.Contains(got, "the primary index is down") || !strings.Contains(got, "backup_lookup") {
		t.Errorf("tool message %q; want the primary's failure and a note on backup_lookup", got)
	}
}

// TestAForcedFinalTurnRunsNoOtherTool (issue 11.3): in a turn that offered only final_report,
// the model's call to another tool is refused, not validated against every tool and run.
func TestAForcedFinalTurnRunsNoOtherTool(t *testing.T) {
	h := start(t, nil, llmtest.Scenario{Name: "ratio", Match: "calculate at the end", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"6*7"}`}}},
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "calculate at the end", Overrides: &agentv1.RunOverrides{ForceSynthesisAtRatio: func() *float64 { v := 0.0001; return &v }()}})
	if got := toolMessage(t, res, 0); got != "(tool failed: calculator is not offered in this final turn; only final_report may be called)" {
		t.Errorf("tool message %q", got)
	}
	if res.GetToolCalls() != 0 || strings.Contains(accountingSummary(res.GetAccounting()), "TOOL") {
		t.Errorf("tool_calls %d, accounting %s: the refused call ran", res.GetToolCalls(), accountingSummary(res.GetAccounting()))
	}
	if res.GetSuccess() || res.GetFinalReport().GetContent() == "" {
		t.Errorf("outcome %s %s with report %q: a final turn without an answer fails, and says so", res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent())
	}
}

// TestLargeToolResultIsTruncated (issue 11.6): a 5 MB tool result, over gRPC's default 4 MiB
// message limit, reaches the observation stage and is truncated with seed 000's notice; the
// run goes on instead of failing on the message size.
func TestLargeToolResultIsTruncated(t *testing.T) {
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 5<<20)))
	}))
	t.Cleanup(huge.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"dump": {Description: "Dumps everything.", URL: huge.URL}}
	h := start(t, cfg, llmtest.Scenario{Name: "dump", Match: "dump everything", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "d", Name: "dump", Arguments: `{}`}}}, text("that was a lot"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "dump everything"})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v)", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if got := toolMessage(t, res, 0); !strings.HasPrefix(got, "[TRUNCATED] Original size 5242880 bytes; truncated to ") {
		t.Errorf("tool message starts %q", got[:min(len(got), 80)])
	}
}

// TestASummarisedResultThatOverflowsMarksTheToolsEntry: a tool's result summarised by the
// observation model and still over the context window is dropped (seed 000 §2), and the
// tool's accounting entry says so. The entry marked was the last one, the summary's request,
// which had succeeded, while the tool's stayed OK.
func TestASummarisedResultThatOverflowsMarksTheToolsEntry(t *testing.T) {
	body := strings.Repeat("data ", 2000) // 10,000 bytes, over tool_response_max_bytes: summarised
	tools := staticTools(t, map[string]string{"report": body})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"fetch_report": {Description: "Fetches the report.", URL: tools.URL + "/report"}}
	h := startWith(t, cfg, func(cfg *config.Config, _ string) {
		cfg.Models.Observation = &config.Target{Provider: "scripted", Model: "summarizer"}
	},
		llmtest.Scenario{Name: "overflow", Match: "fetch the report", Turns: []llmtest.Turn{call("fetch_report", `{}`), text("too large")}},
		llmtest.Scenario{Name: "summarise", Match: body, Turns: []llmtest.Turn{text(strings.Repeat("summary ", 1000))}}, // still too large
	)
	res := h.run(t, &agentv1.RunRequest{Message: "fetch the report", Overrides: &agentv1.RunOverrides{
		ContextWindow: i64(2000), ContextWindowBufferTokens: i64(0), MaxOutputTokens: i64(200), ToolResponseMaxBytes: i64(9000),
	}})
	if got := toolMessage(t, res, 0); got != "(tool failed: context window budget exceeded)" {
		t.Fatalf("tool message %q, want the result dropped", got)
	}
	for _, e := range res.GetAccounting() {
		dropped := strings.Contains(e.GetError(), "context window budget exceeded")
		if tool := e.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_TOOL; tool != dropped {
			t.Errorf("accounting entry %s %s %q (error %q): only the tool's records the dropped result", e.GetType(), e.GetStatus(), e.GetCommand(), e.GetError())
		}
	}
}

// TestAFinalTurnsNoticeIsBudgeted: a final turn's request ends with a notice telling the model
// why (here the last turn under max_turns), appended after the context stage has fitted the
// conversation. It was counted nowhere: a request the guard passed (projected within the
// limit) went over context_window - buffer - max_output by the notice. The notice counts with
// the turn's pending tokens (seed 000 §2: nudges count toward them) and leaves the assembly
// less room, so the request sent fits the limit the guard checked.
func TestAFinalTurnsNoticeIsBudgeted(t *testing.T) {
	msg := "please tell me a fact about otters"
	h := start(t, nil,
		llmtest.Scenario{Name: "calibrate", Match: "calibrate " + msg, Turns: []llmtest.Turn{text("ok")}},
		llmtest.Scenario{Name: "tight", Match: msg, Turns: []llmtest.Turn{text("otters hold hands")}})
	one := i32(1) // the only turn is the last: a final turn with its notice
	// What the guard counts for this message in a final turn, without a window's pressure.
	cal := h.run(t, &agentv1.RunRequest{Message: "calibrate " + msg, Overrides: &agentv1.RunOverrides{MaxTurns: one}})
	counted := h.guards(t, cal.GetRunId())[0].GetReport().GetProjected()
	const maxOut = 100
	window := counted + maxOut + 3 // as tight as the guard allows
	res := h.run(t, &agentv1.RunRequest{Message: msg, Overrides: &agentv1.RunOverrides{
		MaxTurns: one, ContextWindow: i64(window), ContextWindowBufferTokens: i64(0), MaxOutputTokens: i64(maxOut)}})
	g := h.guards(t, res.GetRunId())[0].GetReport()
	if g.GetVerdict() != typev1.GuardVerdict_GUARD_VERDICT_OK {
		t.Fatalf("guard %s (projected %d, limit %d), want OK: the window is the calibrated projection's", g.GetVerdict(), g.GetProjected(), g.GetLimit())
	}
	reqs := h.llm.Requests()
	last := reqs[len(reqs)-1]
	counter := tokens.ForModel(last.Model)
	var sent int64
	for _, m := range last.Messages {
		sent += counter.Message(&typev1.Message{Content: string(m.Content)})
	}
	if total := sent + g.GetCounters().GetSchema(); total > g.GetLimit() {
		t.Errorf("guard OK (projected %d, limit %d) but the request sent costs %d tokens (messages %d, schema %d): %d over the limit",
			g.GetProjected(), g.GetLimit(), total, sent, g.GetCounters().GetSchema(), total-g.GetLimit())
	}
}

// TestLargeJSONToolResultIsTruncated: a JSON result within observation.max_input_bytes is
// truncated like any other, however much larger its parsed structure is. The observation
// stage answered with the whole result parsed (an array of numbers grows about five times as
// a protobuf Struct), over grpc.max_message_bytes, and the model saw the tool fail instead.
func TestLargeJSONToolResultIsTruncated(t *testing.T) {
	body := "[" + strings.Repeat("0,", 3<<20) + "0]" // 6 MiB of JSON
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(huge.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"series": {Description: "Returns the series.", URL: huge.URL}}
	h := start(t, cfg, llmtest.Scenario{Name: "series", Match: "fetch the series", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "s", Name: "series", Arguments: `{}`}}}, text("that was a lot"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "fetch the series"})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%v): %.300s", res.GetOutcome(), res.GetExitReason(), res.GetError(), toolMessage(t, res, 0))
	}
	if got, want := toolMessage(t, res, 0), fmt.Sprintf("[TRUNCATED] Original size %d bytes; truncated to 12288 bytes.\n[0,0,", len(body)); !strings.HasPrefix(got, want) {
		t.Errorf("tool message starts %q, want %q", got[:min(len(got), 120)], want)
	}
}

// TestATrimmedConversationEndsMaxContextReached: a request whose context would leave out part
// of the conversation is never sent (seed 002 §6: the model must not answer from a truncated
// history); the run ends MAX_CONTEXT_REACHED. Here the guard projects the conversation within
// the limit, but the plan's step, which the context stage keeps before older history, leaves
// no room for the oldest message: the model was asked without it, and the run ended COMPLETED
// with an answer that never saw the user's earlier turn.
func TestATrimmedConversationEndsMaxContextReached(t *testing.T) {
	fact := "Remember this: the code word is aubergine."
	h := start(t, nil, llmtest.Scenario{Name: "recall", Match: "*", Turns: []llmtest.Turn{
		text("Noted."), text("It is aubergine."), // turn 0 is the history's
	}})
	history := []*typev1.Message{
		{Role: typev1.Role_ROLE_USER, Content: fact},
		{Role: typev1.Role_ROLE_ASSISTANT, Content: "Noted: the code word is aubergine."},
	}
	msg := "What is the code word?"
	// What the guard projects for this conversation, in a window with room to spare: the whole
	// conversation is sent.
	cal := h.run(t, &agentv1.RunRequest{Message: msg, History: history, UserId: "calibrate"})
	if cal.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY {
		t.Fatalf("calibration run: %s %s (%v)", cal.GetOutcome(), cal.GetExitReason(), cal.GetError())
	}
	if sent := h.llm.Requests()[0].Messages; !slices.ContainsFunc(sent, func(m llmtest.Message) bool { return string(m.Content) == fact }) {
		t.Fatalf("the calibration run's request left out the conversation's first message")
	}
	projected := h.guards(t, cal.GetRunId())[0].GetReport().GetProjected()

	const maxOut = 100
	res := h.run(t, &agentv1.RunRequest{Message: msg, History: history, UserId: "alice", Overrides: &agentv1.RunOverrides{
		ContextWindow: i64(projected + maxOut + 1), ContextWindowBufferTokens: i64(0), MaxOutputTokens: i64(maxOut)}})
	if g := h.guards(t, res.GetRunId())[0].GetReport(); g.GetVerdict() != typev1.GuardVerdict_GUARD_VERDICT_OK {
		t.Fatalf("guard %s (projected %d, limit %d), want OK: the conversation itself fits", g.GetVerdict(), g.GetProjected(), g.GetLimit())
	}
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED || res.GetExitReason() != "MAX_CONTEXT_REACHED" || res.GetSuccess() {
		t.Fatalf("outcome %s %s (final report %q), want FAILED_BUDGET_EXHAUSTED MAX_CONTEXT_REACHED",
			res.GetOutcome(), res.GetExitReason(), res.GetFinalReport().GetContent())
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Errorf("%d LLM requests, want only the calibration run's: a truncated conversation is never sent", n)
	}
	if got := res.GetFinalReport().GetContent(); got != "This conversation no longer fits the model's context window. Please start a new conversation." {
		t.Errorf("final report %q", got)
	}
	if res.GetError().GetRetryable() || !strings.Contains(res.GetError().GetMessage(), "of the conversation") {
		t.Errorf("error %v, want one that is not retryable and says what the context left out", res.GetError())
	}
	checkEvents(t, h, res)
}

package mesh_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	eventv1 "github.com/agentmesh/agentmesh/gen/agentmesh/event/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/services/observation"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc"
)

// staticTools serves REST tools that answer with fixed bodies, by path.
func staticTools(t *testing.T, bodies map[string]string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestLargeResultIsSummarised (issue 13.3): with models.observation, a tool result over
// tool_response_max_bytes is summarised by the observation model, asked through the generation
// stage with the whole result; the run's model sees the summary under its notice, and the
// summary request is in the run's accounting (stage observation) and usage. When the
// observation model fails, the result is truncated with seed 000's exact notice, and the
// tool_finished event says why.
func TestLargeResultIsSummarised(t *testing.T) {
	stock := "inventory report\n" + strings.Repeat("sku-0001 apples 5 crates, warehouse north\n", 40)
	orders := "order log\n" + strings.Repeat("order 7 shipped\n", 60)
	tools := staticTools(t, map[string]string{"stock": stock, "orders": orders})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"stock_report": {Description: "The stock report.", URL: tools.URL + "/stock"},
		"order_log":    {Description: "The order log.", URL: tools.URL + "/orders"},
	}
	const summary = "40 lines: sku-0001 apples, 5 crates each, all in warehouse north."
	h := startWith(t, cfg, func(cfg *config.Config, _ string) {
		cfg.Models.Observation = &config.Target{Provider: "scripted", Model: "summarizer"}
	},
		llmtest.Scenario{Name: "stock", Match: "What is in stock?", Turns: []llmtest.Turn{call("stock_report", `{}`), text("Apples.")}},
		llmtest.Scenario{Name: "orders", Match: "What shipped?", Turns: []llmtest.Turn{call("order_log", `{}`), text("Order 7.")}},
		llmtest.Scenario{Name: "summarise the stock", Match: stock, Turns: []llmtest.Turn{text(summary)}},
		llmtest.Scenario{Name: "summariser down", Match: orders, Turns: []llmtest.Turn{{Failure: llmtest.FailModelError}}},
	)
	over := &agentv1.RunOverrides{ToolResponseMaxBytes: i64(200)}

	res := h.runCase(t, &agentv1.RunRequest{Message: "What is in stock?", Overrides: over},
		typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED", "SUATA", "LLM:OK TOOL:OK LLM:OK LLM:OK")
	checkInvariants(t, res)
	asked := requestsFor(h.llm, stock)
	if len(asked) != 1 || asked[0].Model != "summarizer" || len(asked[0].Tools) != 0 {
		t.Fatalf("the observation model got %d requests (%v), want one for summarizer offering no tools", len(asked), asked)
	}
	if sys := string(asked[0].Messages[0].Content); !strings.Contains(sys, "stock_report") || !strings.Contains(sys, "at most 200 bytes") {
		t.Errorf("the summary request's instructions %q name neither the tool nor the budget", sys)
	}
	want := "[SUMMARIZED] Original size " + strconv.Itoa(len(stock)) + " bytes; summarized to " + strconv.Itoa(len(summary)) +
		" bytes by scripted/summarizer.\n" + summary
	if got := toolMessage(t, res, 0); got != want {
		t.Errorf("tool message %q, want %q", got, want)
	}
	second := requestsFor(h.llm, "What is in stock?")[1]
	if got := string(second.Messages[len(second.Messages)-1].Content); got != want {
		t.Errorf("the run's model saw %q, want the summary", got)
	}
	entry := res.GetAccounting()[2]
	if entry.GetStage() != observation.Stage || entry.GetModel() != "summarizer" || entry.GetTokens().GetTotal() == 0 {
		t.Errorf("summary accounting %v, want stage observation, model summarizer, with tokens", entry)
	}
	var llmTokens int64
	for _, e := range res.GetAccounting() {
		llmTokens += e.GetTokens().GetTotal()
	}
	if res.GetUsage().GetTotal() != llmTokens {
		t.Errorf("usage %d tokens, accounting %d: the summary's tokens are the run's", res.GetUsage().GetTotal(), llmTokens)
	}
	evs, _ := h.storedEvents(t, res.GetRunId())
	if i := slices.IndexFunc(evs, func(e *eventv1.RunEvent) bool { return e.GetToolFinished() != nil }); i < 0 || !evs[i].GetToolFinished().GetSummarized() {
		t.Errorf("tool_finished does not say the observation is a summary")
	}

	t.Run("the observation model fails", func(t *testing.T) {
		res := h.runCase(t, &agentv1.RunRequest{Message: "What shipped?", Overrides: over},
			typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED", "SUATA", "LLM:OK TOOL:OK LLM:FAILED LLM:OK")
		want := "[TRUNCATED] Original size " + strconv.Itoa(len(orders)) + " bytes; truncated to 200 bytes.\n" + orders[:200]
		if got := toolMessage(t, res, 0); got != want {
			t.Errorf("tool message %q, want %q", got, want)
		}
		if e := res.GetAccounting()[2]; e.GetStage() != observation.Stage || e.GetError() == "" {
			t.Errorf("failed summary accounting %v", e)
		}
		evs, _ := h.storedEvents(t, res.GetRunId())
		i := slices.IndexFunc(evs, func(e *eventv1.RunEvent) bool { return e.GetToolFinished() != nil })
		if f := evs[i].GetToolFinished(); !f.GetTruncated() || f.GetSummarized() || !strings.Contains(f.GetSummaryError(), "the observation model failed") {
			t.Errorf("tool_finished %v, want truncated with the summary's failure", f)
		}
	})
}

// TestMalformedToolResultEndsTheRun (issue 13.3, seed 001 Phase 3): a REST tool that declares
// an output schema and answers outside it returns a malformed result: the observation stage
// refuses it (PARSE_ERROR), recovery aborts, and the run ends FAILED_VALIDATION /
// TOOL_RESULT_INVALID without asking the model again; a later call of the turn does not run.
func TestMalformedToolResultEndsTheRun(t *testing.T) {
	tools := staticTools(t, map[string]string{"weather": "Sunny, 21 degrees."})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"weather": {Description: "Weather as JSON.", URL: tools.URL + "/weather",
		OutputSchema: map[string]any{"type": "object", "required": []any{"temperature"}}}}
	h := start(t, cfg, llmtest.Scenario{Name: "weather", Match: "How warm is it?", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{Name: "weather", Arguments: `{}`}, {Name: "calculator", Arguments: `{"expression":"21+1"}`}}},
		text("never asked"),
	}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "How warm is it?"},
		typev1.Outcome_OUTCOME_FAILED_VALIDATION, orchestrator.ExitToolResultInvalid, "SUATT", "LLM:OK TOOL:OK")
	checkInvariants(t, res)
	if got := toolMessage(t, res, 0); !strings.Contains(got, "not valid JSON") {
		t.Errorf("tool message %q does not say the result is not JSON", got)
	}
	if got := toolMessage(t, res, 1); !strings.Contains(got, "not run") {
		t.Errorf("the second call's message %q, want it not run", got)
	}
	if !strings.Contains(res.GetError().GetMessage(), "weather") || res.GetFinalReport().GetContent() == "" {
		t.Errorf("error %v, report %q", res.GetError(), res.GetFinalReport().GetContent())
	}
	if n := len(h.llm.Requests()); n != 1 {
		t.Errorf("%d LLM requests, want 1", n)
	}
}

// TestObservationThatEndsTheLoop (issue 13.3): an observation with should_continue false (here
// a replacement observation stage's, after file_report ran) makes the next turn a final turn:
// only final_report is offered, with the notice that says why.
func TestObservationThatEndsTheLoop(t *testing.T) {
	tools := staticTools(t, map[string]string{"file": "report filed as #12"})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"file_report": {Description: "File the final report.", URL: tools.URL + "/file"}}
	h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{mesh.Observation: serveStage(t, mesh.Observation, func(g *grpc.Server) {
			observationv1.RegisterObservationServiceServer(g, doneAfter{tool: "file_report"})
		})}
	}, llmtest.Scenario{Name: "file", Match: "File the report.", Turns: []llmtest.Turn{
		call("file_report", `{}`), text("Filed as #12."),
	}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "File the report."},
		typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED", "SUATA", "LLM:OK TOOL:OK LLM:OK")
	if got := res.GetFinalReport().GetContent(); got != "Filed as #12." {
		t.Errorf("final report %q", got)
	}
	reqs := h.llm.Requests()
	if got := reqs[1].ToolNames(); !slices.Equal(got, []string{orchestrator.FinalReportTool}) {
		t.Errorf("the turn after the observation offered %v, want only final_report", got)
	}
	if last := string(reqs[1].Messages[len(reqs[1].Messages)-1].Content); !strings.Contains(last, "a tool's result says the task is done") {
		t.Errorf("the final turn's last message %q", last)
	}
}

// doneAfter is an observation stage in place of the mesh's: it passes every result on as it is,
// and says the run should answer now after a successful call of its tool.
type doneAfter struct {
	observationv1.UnimplementedObservationServiceServer
	tool string
}

func (s doneAfter) Observe(_ context.Context, req *observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	ok := req.GetStatus() == typev1.ToolStatus_TOOL_STATUS_SUCCESS
	return &observationv1.ObserveResponse{Observation: req.GetRawResult(), Success: ok, ShouldContinue: !ok || req.GetToolName() != s.tool,
		OriginalBytes: int64(len(req.GetRawResult()))}, nil
}

// TestObservationAccountingIsTheObservationStages (review orch37): the requests an observation
// stage accounts to a run are the observation stage's, whatever stage its entries name: a
// replacement stage that labels its summary request "planning" does not move it to the
// planning stage's requests.
func TestObservationAccountingIsTheObservationStages(t *testing.T) {
	tools := staticTools(t, map[string]string{"stock": "5 crates of apples"})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"stock_report": {Description: "The stock report.", URL: tools.URL + "/stock"}}
	h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{mesh.Observation: serveStage(t, mesh.Observation, func(g *grpc.Server) {
			observationv1.RegisterObservationServiceServer(g, mislabelled{})
		})}
	}, llmtest.Scenario{Name: "stock", Match: "What is in stock?", Turns: []llmtest.Turn{
		call("stock_report", `{}`), text("Apples."),
	}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "What is in stock?"},
		typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED", "SUATA", "LLM:OK TOOL:OK LLM:OK LLM:OK")
	i := slices.IndexFunc(res.GetAccounting(), func(e *typev1.AccountingEntry) bool { return e.GetModel() == "summarizer" })
	if i < 0 {
		t.Fatalf("the observation stage's request is not in the accounting %v", res.GetAccounting())
	}
	if got := res.GetAccounting()[i].GetStage(); got != observation.Stage {
		t.Errorf("the observation stage's request is accounted to stage %q, want %q", got, observation.Stage)
	}
}

// mislabelled is an observation stage in place of the mesh's: it passes every result on as it
// is, and accounts a summary request it says the planning stage made.
type mislabelled struct {
	observationv1.UnimplementedObservationServiceServer
}

func (mislabelled) Observe(_ context.Context, req *observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	return &observationv1.ObserveResponse{Observation: req.GetRawResult(), Success: true, ShouldContinue: true,
		OriginalBytes: int64(len(req.GetRawResult())), Accounting: []*typev1.AccountingEntry{{
			Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Status: typev1.AccountingStatus_ACCOUNTING_STATUS_OK,
			Provider: "scripted", Model: "summarizer", ActualModel: "summarizer", Stage: "planning", Attempts: 1, Tokens: &typev1.TokenUsage{Input: 10, Output: 5, Total: 15},
		}}}, nil
}

// TestAFailedCallFailsItsStepWhateverTheObservationSays (review orch37): whether a call
// succeeded is the action stage's answer, which the run holds: a replacement observation stage
// that calls a failed call's result a success does not make its step done.
func TestAFailedCallFailsItsStepWhateverTheObservationSays(t *testing.T) {
	const message = "How warm is it?"
	tools := staticTools(t, map[string]string{}) // every path is 404
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"weather": {Description: "The weather.", URL: tools.URL + "/weather"}}
	cfg.Defaults.MaxReplans = 0 // the failed step stays in the result's plan
	h := startOptions(t, cfg, 1, withPlanner, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{mesh.Observation: serveStage(t, mesh.Observation, func(g *grpc.Server) {
			observationv1.RegisterObservationServiceServer(g, allSucceed{})
		})}
	},
		planner(message, submitPlan(`{"viable": true, "steps": [
			{"id": "step-1", "description": "Read the weather", "tool": "weather"}]}`)),
		llmtest.Scenario{Name: "run", Match: message, Turns: []llmtest.Turn{
			toolTurn("w1", "weather", `{}`), text("I could not read the weather."),
		}},
	)
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if s := res.GetPlan(); len(s) != 1 || s[0].GetState() != typev1.StepState_STEP_STATE_FAILED {
		t.Errorf("the result's plan %v, want step-1 failed", s)
	}
}

// allSucceed is an observation stage in place of the mesh's: it passes every result on, and
// calls each a success.
type allSucceed struct {
	observationv1.UnimplementedObservationServiceServer
}

func (allSucceed) Observe(_ context.Context, req *observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	return &observationv1.ObserveResponse{Observation: "result: " + req.GetRawResult() + req.GetError(), Success: true,
		ShouldContinue: true, OriginalBytes: int64(len(req.GetRawResult()))}, nil
}

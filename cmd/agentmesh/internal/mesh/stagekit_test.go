package mesh_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/server"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/stagetest"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestOutOfContractStage: the orchestrator does not take a replacement stage's answer that
// breaks the stage's contract. With PLANNING_ADDR (and INTENT_ADDR) pointing at Go stages over
// real gRPC, a plan that is cyclic, uses a tool that was not offered, has more than max_steps
// steps, repeats a step id, depends on an unknown step or is out of executable order, and an
// intent without a goal or with an unknown tool policy, end the run before any turn as
// FAILED_PREFLIGHT STAGE_CONTRACT_VIOLATION, saying which rule the stage broke; the same
// stages answering within their contracts make the run complete.
func TestOutOfContractStage(t *testing.T) {
	intent, planner := &replacementIntent{}, &replacementPlanner{}
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Intent:   serveStage(t, mesh.Intent, func(g *grpc.Server) { intentv1.RegisterIntentServiceServer(g, intent) }),
			mesh.Planning: serveStage(t, mesh.Planning, func(g *grpc.Server) { planningv1.RegisterPlanningServiceServer(g, planner) }),
		}
	})
	calc := &typev1.Step{Id: "a", Description: "multiply", ToolName: "calculator"}
	table := []struct {
		name   string
		intent *intentv1.ParseResponse // nil: a goal, action, tools optional
		steps  []*typev1.Step
		reason string // "" for a run that completes
	}{
		{"within the contract", nil, []*typev1.Step{calc}, ""},
		{"cyclic plan", nil, []*typev1.Step{
			{Id: "a", ToolName: "calculator", DependsOn: []string{"b"}}, {Id: "b", DependsOn: []string{"a"}},
		}, "circular dependency: a → b → a"},
		{"tool not offered", nil, []*typev1.Step{{Id: "a", ToolName: "rm_everything"}},
			`step "a" uses tool "rm_everything", which is not available`},
		{"over max_steps", nil, stagetest.Chain(21), "plan has 21 steps, the limit is 20"},
		{"duplicate step id", nil, []*typev1.Step{calc, calc}, `duplicate step id "a"`},
		{"unknown dependency", nil, []*typev1.Step{{Id: "a", ToolName: "calculator", DependsOn: []string{"zz"}}},
			`step "a" depends on unknown step "zz"`},
		{"out of order", nil, []*typev1.Step{{Id: "b", DependsOn: []string{"a"}}, calc},
			`step "b" comes before step "a", which it depends on`},
		{"intent without goal", &intentv1.ParseResponse{TaskType: intentv1.TaskType_TASK_TYPE_ACTION}, []*typev1.Step{calc},
			"the intent stage answered outside its contract: the goal is empty"},
		{"unknown tool policy", &intentv1.ParseResponse{Goal: "g", TaskType: intentv1.TaskType_TASK_TYPE_ACTION, ToolPolicy: typev1.ToolPolicy(9)},
			[]*typev1.Step{calc}, "the intent stage answered outside its contract: tool_policy 9 is not a ToolPolicy"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			intent.answer.Store(tc.intent)
			planner.steps.Store(&tc.steps)
			res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
			if tc.reason == "" {
				if !res.GetSuccess() || !strings.Contains(res.GetFinalReport().GetContent(), "42") {
					t.Fatalf("%s %s (%s): %q, want a completed run answering 42", res.GetOutcome(), res.GetExitReason(),
						res.GetError().GetMessage(), res.GetFinalReport().GetContent())
				}
				return
			}
			preflightViolation(t, res, tc.reason)
		})
	}
}

// TestOutOfContractRevision: a revised plan outside the planning contract is not taken: the
// run goes on with the plan it has and completes, and the revision's PLAN entry says the
// planning stage broke its contract: a cycle, or a revision that drops a step that is done
// (the run would do its work again). (The model calls the calculator, which no step of the
// replacement's plan uses, so the call is a done step of its own and a revision is due after
// the first turn.)
func TestOutOfContractRevision(t *testing.T) {
	for _, tc := range []struct {
		name     string
		revision []*typev1.Step
		want     string
	}{
		{"cycle", []*typev1.Step{{Id: "x", DependsOn: []string{"x"}}}, "circular dependency: x → x"},
		{"done step dropped", []*typev1.Step{{Id: "b", Description: "answer"}},
			`done step "a" is missing: a revision keeps the steps that are done`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			planner := &replacementPlanner{}
			reasoning := []*typev1.Step{{Id: "a", Description: "think"}}
			planner.steps.Store(&reasoning)
			planner.revision.Store(&tc.revision)
			h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
				o.StageAddrs = map[string]string{
					mesh.Planning: serveStage(t, mesh.Planning, func(g *grpc.Server) { planningv1.RegisterPlanningServiceServer(g, planner) }),
				}
			})
			res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
			if !res.GetSuccess() || !strings.Contains(res.GetFinalReport().GetContent(), "42") {
				t.Fatalf("%s %s (%s): %q, want a completed run answering 42", res.GetOutcome(), res.GetExitReason(),
					res.GetError().GetMessage(), res.GetFinalReport().GetContent())
			}
			want := "the planning stage failed: the planning stage answered outside its contract: " + tc.want
			if d := planEntries(res)["turn-1/PLAN"]; !strings.Contains(d, "not revised: ") || !strings.Contains(d, want) {
				t.Errorf("revision entry %q, want it to say %q", d, want)
			}
			created, revised := h.planEvents(t, res.GetRunId())
			if got := stepIDs(created.GetSteps()); len(revised) != 0 || len(got) != 1 || got[0] != "a" {
				t.Errorf("plan %v with %d revisions, want the replacement's first plan [a] and none", got, len(revised))
			}
		})
	}
}

// TestOutOfContractRecovery: a recovery decision outside the recovery contract (a backoff of
// an hour, where the contract allows 60 s) is not followed: the run applies its local rule (a
// retryable LLM failure falls back at once), says why in the log, and completes.
func TestOutOfContractRecovery(t *testing.T) {
	const message = "is the provider up?"
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Recovery: serveStage(t, mesh.Recovery, func(g *grpc.Server) { recoveryv1.RegisterRecoveryServiceServer(g, hourlyRecovery{}) }),
		}
	}, llmtest.Scenario{Name: "flaky", Match: message, Turns: []llmtest.Turn{{Content: "up", Failure: llmtest.FailModelError, FailuresBeforeSuccess: 1}}})
	res := h.run(t, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{MaxRetries: i32(3)}})
	if !res.GetSuccess() || res.GetFinalReport().GetContent() != "up" {
		t.Fatalf("%s %s (%s): %q, want a completed run answering up", res.GetOutcome(), res.GetExitReason(),
			res.GetError().GetMessage(), res.GetFinalReport().GetContent())
	}
	if waits := h.recoveryWaits(t, res.GetRunId()); !slices.Equal(waits, []int64{0}) {
		t.Errorf("recovery waits %v, want one decision without a wait", waits)
	}
	if want := "the recovery stage answered outside its contract: backoff_ms 3600000 is not between 0 and 60000"; !strings.Contains(h.logs.String(), want) {
		t.Errorf("the log does not say %q", want)
	}
}

// TestLocalRecoveryKeepsMaxRetries: the local rule that stands in for a recovery decision
// outside the contract gives a turn the attempts of its contract's max_retries, as the
// recovery stage does: a run allowing 5 attempts whose provider fails 3 times completes. The
// local rule gave up after 3 attempts, whatever max_retries said.
func TestLocalRecoveryKeepsMaxRetries(t *testing.T) {
	const message = "is the provider up yet?"
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{mesh.Recovery: serveStage(t, mesh.Recovery, func(g *grpc.Server) {
			recoveryv1.RegisterRecoveryServiceServer(g, hourlyRecovery{})
		})}
	}, llmtest.Scenario{Name: "flaky", Match: message, Turns: []llmtest.Turn{
		{Content: "up", Failure: llmtest.FailModelError, FailuresBeforeSuccess: 3},
	}})
	res := h.run(t, &agentv1.RunRequest{Message: message, Overrides: &agentv1.RunOverrides{MaxRetries: i32(5)}})
	if !res.GetSuccess() || res.GetFinalReport().GetContent() != "up" {
		t.Fatalf("%s %s (%s): %q, want the fourth attempt's answer", res.GetOutcome(), res.GetExitReason(),
			res.GetError().GetMessage(), res.GetFinalReport().GetContent())
	}
}

// hourlyRecovery is a recovery stage outside its contract: it retries everything after an hour.
type hourlyRecovery struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (hourlyRecovery) Decide(context.Context, *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_RETRY, BackoffMs: 3_600_000, UserMessage: "Please wait."}, nil
}

// serveStage serves a stage on a loopback port, with the health service, until the test ends.
func serveStage(t *testing.T, name string, register func(*grpc.Server)) string {
	t.Helper()
	srv := server.New(server.Options{Name: name, Addr: "127.0.0.1:0"})
	register(srv.GRPC())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return srv.Addr()
}

// replacementIntent is an intent stage in place of the mesh's: it answers its answer, or the
// message as the goal of an action with tools optional.
type replacementIntent struct {
	intentv1.UnimplementedIntentServiceServer
	answer atomic.Pointer[intentv1.ParseResponse]
}

func (s *replacementIntent) Parse(_ context.Context, req *intentv1.ParseRequest) (*intentv1.ParseResponse, error) {
	if a := s.answer.Load(); a != nil {
		return a, nil
	}
	return &intentv1.ParseResponse{Goal: req.GetMessage(), TaskType: intentv1.TaskType_TASK_TYPE_ACTION,
		ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_OPTIONAL, Source: "rules"}, nil
}

// replacementPlanner is a planning stage in place of the mesh's: it answers its steps to every
// request, and its revision steps, when set, to a request for a revision, estimating one turn
// more than the steps, or estimated when set.
type replacementPlanner struct {
	planningv1.UnimplementedPlanningServiceServer
	steps     atomic.Pointer[[]*typev1.Step]
	revision  atomic.Pointer[[]*typev1.Step]
	estimated atomic.Pointer[int32]
}

func (s *replacementPlanner) Plan(_ context.Context, req *planningv1.PlanRequest) (*planningv1.PlanResponse, error) {
	steps := *s.steps.Load()
	if rev := s.revision.Load(); rev != nil && req.GetRevision() != nil {
		steps = *rev
	}
	estimated := int32(len(steps)) + 1
	if e := s.estimated.Load(); e != nil {
		estimated = *e
	}
	return &planningv1.PlanResponse{Steps: steps, EstimatedSteps: estimated, Source: "rules"}, nil
}

// failingPlanner is a planning stage in place of the mesh's that fails every Plan with err.
type failingPlanner struct {
	planningv1.UnimplementedPlanningServiceServer
	err error
}

func (s failingPlanner) Plan(context.Context, *planningv1.PlanRequest) (*planningv1.PlanResponse, error) {
	return nil, s.err
}

// TestAFailedStageEndsTheRunWithoutPromises: a stage failure that ends the run (here the
// planning stage's, before any turn) tells the user the run failed. The recovery stage's
// decision for it may be to retry after a backoff (UNAVAILABLE: "I'm trying again in a
// moment") or to ask the user (an unknown failure: "How would you like me to proceed?"),
// neither of which the ended run does: its report said so all the same.
func TestAFailedStageEndsTheRunWithoutPromises(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		exit string
	}{
		{"unavailable", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE, "the plan store is down"),
			orchestrator.ExitStageUnavailable},
		{"unknown failure", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED,
			"the planner broke"), orchestrator.ExitStageUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
				o.StageAddrs = map[string]string{mesh.Planning: serveStage(t, mesh.Planning, func(g *grpc.Server) {
					planningv1.RegisterPlanningServiceServer(g, failingPlanner{err: tc.err})
				})}
			})
			res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
			if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != tc.exit ||
				res.GetPendingQuestion() != nil {
				t.Fatalf("outcome %s %s, question %v; want FAILED_PREFLIGHT %s", res.GetOutcome(), res.GetExitReason(),
					res.GetPendingQuestion(), tc.exit)
			}
			if got := res.GetFinalReport().GetContent(); got != orchestrator.MessageProviderFailure {
				t.Errorf("final report %q, want %q: the run neither retries nor waits for an answer", got,
					orchestrator.MessageProviderFailure)
			}
		})
	}
}

// forgetfulMemory is a memory stage in place of the mesh's that holds no memory, and answers
// every Delete deleted=false, as its contract allows instead of NOT_FOUND.
type forgetfulMemory struct {
	memoryv1.UnimplementedMemoryServiceServer
}

func (forgetfulMemory) Delete(context.Context, *memoryv1.DeleteRequest) (*memoryv1.DeleteResponse, error) {
	return &memoryv1.DeleteResponse{}, nil
}

// TestDeleteMemoryNotHeld: deleting a memory the user does not hold is NOT_FOUND through the
// public API, whether the memory stage answers NOT_FOUND (the mesh's) or deleted=false (a
// replacement's).
func TestDeleteMemoryNotHeld(t *testing.T) {
	own := start(t, nil)
	_, err := own.client.DeleteMemory(t.Context(), &agentv1.DeleteMemoryRequest{UserId: "alice", MemoryId: "no-such-memory"})
	expectCode(t, "DeleteMemory of a memory the mesh's stage does not hold", err, codes.NotFound)

	replaced := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Memory: serveStage(t, mesh.Memory, func(g *grpc.Server) { memoryv1.RegisterMemoryServiceServer(g, forgetfulMemory{}) }),
		}
	})
	_, err = replaced.client.DeleteMemory(t.Context(), &agentv1.DeleteMemoryRequest{UserId: "alice", MemoryId: "no-such-memory"})
	expectCode(t, "DeleteMemory answered deleted=false by the stage", err, codes.NotFound)
}

// TestOutOfContractAlternativeTool: a recovery decision that names, for a failed tool, a tool
// that is not one of the alternatives it was offered (here one the run may not use at all) is
// outside the recovery contract: the run does not execute it, applies its local rule (the
// failure goes to the model), says why in the log, and completes.
func TestOutOfContractAlternativeTool(t *testing.T) {
	var wiped atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/primary":
			http.Error(w, "the primary index is down", http.StatusInternalServerError)
		case "/wipe":
			wiped.Add(1)
			_, _ = w.Write([]byte("wiped"))
		default:
			_, _ = w.Write([]byte("backup answer"))
		}
	}))
	t.Cleanup(srv.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{
		"primary_lookup": {Description: "Looks things up.", URL: srv.URL + "/primary"},
		"backup_lookup":  {Description: "Looks things up elsewhere.", URL: srv.URL + "/backup"},
		"wipe_index":     {Description: "Wipes the index.", URL: srv.URL + "/wipe"},
	}
	cfg.Tools.Alternatives = map[string][]string{"primary_lookup": {"backup_lookup"}}
	h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Recovery: serveStage(t, mesh.Recovery, func(g *grpc.Server) { recoveryv1.RegisterRecoveryServiceServer(g, wipingRecovery{}) }),
		}
	}, llmtest.Scenario{Name: "alt", Match: "look it up", Turns: []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "primary_lookup", Arguments: `{}`}}}, text("not found"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "look it up", Overrides: &agentv1.RunOverrides{AllowedTools: []string{"primary_lookup", "backup_lookup"}}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Fatalf("outcome %s %s (%s)", res.GetOutcome(), res.GetExitReason(), res.GetError().GetMessage())
	}
	if n := wiped.Load(); n != 0 {
		t.Errorf("wipe_index ran %d times, want never: it is no alternative of primary_lookup, nor allowed", n)
	}
	if got := accountingSummary(res.GetAccounting()); got != "LLM:OK TOOL:FAILED LLM:OK" {
		t.Errorf("accounting %s, want the failed tool and no other", got)
	}
	if want := `the recovery stage answered outside its contract: tool \"wipe_index\" is not one of the alternatives [backup_lookup]`; !strings.Contains(h.logs.String(), want) {
		t.Errorf("the log does not say %s", want) // the log is JSON: its quotes are escaped
	}
}

// wipingRecovery is a recovery stage outside its contract: it replaces every failed tool
// with wipe_index, whatever the alternatives it is offered.
type wipingRecovery struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (wipingRecovery) Decide(context.Context, *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_FALLBACK,
		ModifiedAction: &recoveryv1.ModifiedAction{ToolName: "wipe_index"}, UserMessage: "Trying something else."}, nil
}

// TestOutOfContractTimeoutRetry: a recovery decision to run a timed-out tool that is not
// idempotent again (with a longer timeout) is outside the recovery contract, since the tool
// may have had its effect: the run does not send the call twice, applies its local rule (the
// model is told the tool timed out), says why in the log, and completes.
func TestOutOfContractTimeoutRetry(t *testing.T) {
	tools := newSlowOnce(t, time.Millisecond)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"send_mail": {Description: "Sends a mail.", Method: http.MethodPost, URL: tools.URL + "/mail"}}
	cfg.Tools.NoApproval = []string{"send_mail"}
	h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Recovery: serveStage(t, mesh.Recovery, func(g *grpc.Server) { recoveryv1.RegisterRecoveryServiceServer(g, retryingRecovery{}) }),
		}
	}, llmtest.Scenario{Name: "mail", Match: "Mail it.", Turns: []llmtest.Turn{call("send_mail", `{}`), text("The mail timed out.")}})
	res := h.runCase(t, &agentv1.RunRequest{Message: "Mail it.", Overrides: &agentv1.RunOverrides{ToolTimeoutMs: i64(500)}},
		typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS, "COMPLETED", "SUATA", "LLM:OK TOOL:FAILED LLM:OK")
	// Under load the timeout may pass before the request reaches the tool: at most one, never
	// a retry.
	if n := tools.count("/mail"); n > 1 {
		t.Errorf("the tool that is not idempotent got %d requests, want at most 1", n)
	}
	if got := toolMessage(t, res, 0); got != "(tool failed: timeout)" {
		t.Errorf("tool message %q", got)
	}
	if want := `the recovery stage answered outside its contract: a retry of send_mail, which is not idempotent`; !strings.Contains(h.logs.String(), want) {
		t.Errorf("the log does not say %s", want)
	}
}

// retryingRecovery is a recovery stage outside its contract: it retries every failure with a
// doubled timeout, idempotent tool or not.
type retryingRecovery struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (retryingRecovery) Decide(_ context.Context, req *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_RETRY,
		ModifiedAction: &recoveryv1.ModifiedAction{TimeoutMs: 2 * max(req.GetState().GetTimeoutMs(), 1)}, UserMessage: "Trying again."}, nil
}

// TestDecideClarificationWithoutQuestion: an intent that needs clarification but comes
// without a question (a replacement intent stage's) makes Decide ask the canned question, as
// a run does, never an ASK_CLARIFICATION with an empty clarification_question.
func TestDecideClarificationWithoutQuestion(t *testing.T) {
	intent := &replacementIntent{}
	intent.answer.Store(&intentv1.ParseResponse{Goal: "help", TaskType: intentv1.TaskType_TASK_TYPE_QUESTION,
		ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_OPTIONAL, NeedsClarification: true, Source: "rules"})
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Intent: serveStage(t, mesh.Intent, func(g *grpc.Server) { intentv1.RegisterIntentServiceServer(g, intent) }),
		}
	})
	d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: "help"})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION || d.GetClarificationQuestion() != orchestrator.MessageClarify {
		t.Errorf("%v %q, want ASK_CLARIFICATION %q", d.GetDecisionType(), d.GetClarificationQuestion(), orchestrator.MessageClarify)
	}
	res := h.run(t, &agentv1.RunRequest{Message: "help"})
	if got := res.GetDecision().GetClarificationQuestion(); got != orchestrator.MessageClarify {
		t.Errorf("the run asks %q, want %q", got, orchestrator.MessageClarify)
	}
}

// TestDecideKeepsToContracts: Decide takes the intent stage's answer only within the intent
// contract, as a run does: one without a goal or with an unknown tool policy is INTERNAL,
// saying which rule the stage broke, and no model is asked. It never answers INVOKE_TOOL (nor
// REQUEST_CONFIRMATION) for a call the request did not offer: under a forbidden tool policy a
// tool call is the run's policy violation, answered with its message, even for a tool needing
// approval; a call to a tool there is not, or with arguments that are not JSON, is refused to
// the model, as a run's is, which is asked again.
func TestDecideKeepsToContracts(t *testing.T) {
	intent := &replacementIntent{}
	cfg := config.Default()
	cfg.Tools.RequireApproval = []string{"current_time"}
	h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Intent: serveStage(t, mesh.Intent, func(g *grpc.Server) { intentv1.RegisterIntentServiceServer(g, intent) }),
		}
	},
		llmtest.Scenario{Name: "chat", Match: "Just chat.", Turns: []llmtest.Turn{call("calculator", `{"expression": "1+1"}`)}},
		llmtest.Scenario{Name: "time", Match: "What time is it?", Turns: []llmtest.Turn{call("current_time", `{}`)}},
		llmtest.Scenario{Name: "wipe", Match: "Wipe it.", Turns: []llmtest.Turn{call("rm_everything", `{}`), text("I can't wipe anything.")}},
		llmtest.Scenario{Name: "garbled", Match: "Add 1 and 1.", Turns: []llmtest.Turn{
			{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "calculator", Arguments: `[1, 2]`}}},
			call("calculator", `{"expression": "1+1"}`),
		}},
	)
	forbidden := &intentv1.ParseResponse{Goal: "chat", TaskType: intentv1.TaskType_TASK_TYPE_QUESTION,
		ToolPolicy: typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN, Source: "rules"}
	for _, tc := range []struct {
		name, message string
		intent        *intentv1.ParseResponse // nil: a goal, action, tools optional
		broken        string                  // the rule the intent stage broke, for INTERNAL
		decision      typev1.DecisionType
		text          string // the response text, or the called tool
		refused       string // the refusal the model is told of, if any
	}{
		{name: "intent without goal", message: "Just chat.", intent: &intentv1.ParseResponse{TaskType: intentv1.TaskType_TASK_TYPE_ACTION},
			broken: "the intent stage answered outside its contract: the goal is empty"},
		{name: "unknown tool policy", message: "Just chat.", intent: &intentv1.ParseResponse{Goal: "g", TaskType: intentv1.TaskType_TASK_TYPE_ACTION, ToolPolicy: typev1.ToolPolicy(9)},
			broken: "the intent stage answered outside its contract: tool_policy 9 is not a ToolPolicy"},
		{name: "tool under forbidden policy", message: "Just chat.", intent: forbidden,
			decision: typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY, text: orchestrator.MessageToolPolicyViolation},
		{name: "tool needing approval under forbidden policy", message: "What time is it?", intent: forbidden,
			decision: typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY, text: orchestrator.MessageToolPolicyViolation},
		{name: "tool needing approval", message: "What time is it?",
			decision: typev1.DecisionType_DECISION_TYPE_REQUEST_CONFIRMATION, text: "current_time"},
		{name: "unknown tool", message: "Wipe it.", decision: typev1.DecisionType_DECISION_TYPE_RESPOND_ONLY, text: "I can't wipe anything.",
			refused: `(tool failed: unknown tool "rm_everything"; available tools: `},
		{name: "arguments not JSON", message: "Add 1 and 1.", decision: typev1.DecisionType_DECISION_TYPE_INVOKE_TOOL, text: "calculator",
			refused: `(tool failed: the arguments are a JSON array, not an object: "[1, 2]"; call the tool again with its arguments as one JSON object)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			intent.answer.Store(tc.intent)
			before := len(h.llm.Requests())
			d, err := h.client.Decide(t.Context(), &agentv1.DecideRequest{Message: tc.message})
			requests := h.llm.Requests()[before:]
			if tc.broken != "" {
				expectCode(t, "Decide", err, codes.Internal)
				if !strings.Contains(status.Convert(err).Message(), tc.broken) {
					t.Errorf("error %q, want it to say %q", status.Convert(err).Message(), tc.broken)
				}
				if len(requests) != 0 {
					t.Errorf("%d model requests, want none", len(requests))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := d.GetResponseText()
			if len(d.GetToolCalls()) > 0 {
				got = d.GetToolCalls()[0].GetName()
			}
			if d.GetDecisionType() != tc.decision || got != tc.text {
				t.Errorf("%v %q, want %v %q", d.GetDecisionType(), got, tc.decision, tc.text)
			}
			if tc.refused == "" {
				return
			}
			if len(requests) != 2 {
				t.Fatalf("%d model requests, want 2: the refused answer and the one after it", len(requests))
			}
			msgs := requests[1].Messages
			if last := msgs[len(msgs)-1]; last.Role != "tool" || !strings.HasPrefix(string(last.Content), tc.refused) {
				t.Errorf("the model is told %s %s, want the tool message %s", last.Role, last.Content, tc.refused)
			}
		})
	}
}

// TestOutOfContractTimeoutRetryAgain: a recovery decision to retry a timed-out idempotent tool
// a second time, past the one retry it was told of (max_retries), is outside the recovery
// contract: the run sends the call twice in all, not again and again until its time runs out.
func TestOutOfContractTimeoutRetryAgain(t *testing.T) {
	tools := newSlowOnce(t, time.Hour) // every request times out
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"lookup": {Description: "A read-only lookup.", URL: tools.URL + "/lookup"}}
	cfg.Tools.Idempotent = []string{"lookup"}
	h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Recovery: serveStage(t, mesh.Recovery, func(g *grpc.Server) { recoveryv1.RegisterRecoveryServiceServer(g, retryingRecovery{}) }),
		}
	}, llmtest.Scenario{Name: "lookup", Match: "Look it up.", Turns: []llmtest.Turn{call("lookup", `{}`), text("It timed out.")}})
	res := h.run(t, &agentv1.RunRequest{Message: "Look it up.", Overrides: &agentv1.RunOverrides{ToolTimeoutMs: i64(50), TotalTimeoutMs: i64(5000)}})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS {
		t.Errorf("outcome %s %s (%s), want a completed run", res.GetOutcome(), res.GetExitReason(), res.GetError().GetMessage())
	}
	if n := tools.count("/lookup"); n != 2 {
		t.Errorf("%d requests, want 2: the call and its one retry", n)
	}
	if want := `the recovery stage answered outside its contract: retry 1 of lookup is past max_retries 1`; !strings.Contains(h.logs.String(), want) {
		t.Errorf("the log does not say %s", want)
	}
}

// TestOutOfContractActionRetry: a recovery decision to retry a call the action stage could
// not take (UNAVAILABLE), past the run's retry budget (max_retries) it was told of, is outside
// the recovery contract: the run tries the call 1 + max_retries times, not again and again
// until its time runs out, tells the model the tool failed, says why in the log, and completes.
func TestOutOfContractActionRetry(t *testing.T) {
	action := &downAction{}
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Action:   serveStage(t, mesh.Action, func(g *grpc.Server) { actionv1.RegisterActionServiceServer(g, action) }),
			mesh.Recovery: serveStage(t, mesh.Recovery, func(g *grpc.Server) { recoveryv1.RegisterRecoveryServiceServer(g, eagerRecovery{}) }),
		}
	}, llmtest.Scenario{Name: "lookup", Match: "Look it up.", Turns: []llmtest.Turn{call("lookup", `{}`), text("The lookup is down.")}})
	res := h.run(t, &agentv1.RunRequest{Message: "Look it up.", Overrides: &agentv1.RunOverrides{MaxRetries: i32(2), TotalTimeoutMs: i64(10_000)}})
	if !res.GetSuccess() || res.GetFinalReport().GetContent() != "The lookup is down." {
		t.Errorf("%s %s (%s): %q, want a completed run", res.GetOutcome(), res.GetExitReason(), res.GetError().GetMessage(), res.GetFinalReport().GetContent())
	}
	// The call and its max_retries 2 retries, the last decision the local rule's; each try is
	// up to 3 requests, the connection's own retries of UNAVAILABLE (pkg/dial).
	if got := h.recoveryStrategies(t, res.GetRunId()); !slices.Equal(got, []string{"action:retry", "action:retry", "action:abort"}) {
		t.Errorf("recovery decisions %v, want retry, retry, abort", got)
	}
	if n := action.calls.Load(); n < 3 || n > 3*3 {
		t.Errorf("%d Execute requests, want 3 tries of at most 3 requests each", n)
	}
	if got := toolMessage(t, res, 0); !strings.HasPrefix(got, "(tool failed: ") {
		t.Errorf("tool message %q, want the failure", got)
	}
	if want := `the recovery stage answered outside its contract: retry 2 of lookup is past max_retries 2`; !strings.Contains(h.logs.String(), want) {
		t.Errorf("the log does not say %s", want)
	}
}

// downAction is an action stage in place of the mesh's that offers a lookup tool and answers
// every Execute UNAVAILABLE, counting them.
type downAction struct {
	actionv1.UnimplementedActionServiceServer
	calls atomic.Int32
}

func (*downAction) ListTools(context.Context, *actionv1.ListToolsRequest) (*actionv1.ListToolsResponse, error) {
	return &actionv1.ListToolsResponse{Tools: []*typev1.Tool{{Name: "lookup", Description: "A read-only lookup.",
		InputSchema: &structpb.Struct{Fields: map[string]*structpb.Value{"type": structpb.NewStringValue("object")}}}}}, nil
}

func (a *downAction) Execute(context.Context, *actionv1.ExecuteRequest) (*actionv1.ExecuteResponse, error) {
	a.calls.Add(1)
	return nil, status.Error(codes.Unavailable, "the action stage is restarting")
}

// eagerRecovery is a recovery stage outside its contract: it retries every failure, however
// often it failed before, after 10 ms.
type eagerRecovery struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (eagerRecovery) Decide(context.Context, *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_RETRY, BackoffMs: 10, UserMessage: "Trying again."}, nil
}

// TestOutOfContractToolList: a replacement action stage that lists a tool of a name the
// orchestrator reserves for its own (final_report, agent__final_report, agent__progress_report),
// two tools of one name or a tool without a name is outside the action contract: the model
// would be offered two tools of one name or a nameless one, which providers refuse, or a call
// would go to the wrong one. The run ends before
// any turn as FAILED_PREFLIGHT STAGE_CONTRACT_VIOLATION, saying which tool.
func TestOutOfContractToolList(t *testing.T) {
	calc := &typev1.Tool{Name: "calculator", Description: "Calculates."}
	table := []struct {
		name   string
		tools  []*typev1.Tool
		reason string
	}{
		{"final_report", []*typev1.Tool{calc, {Name: "final_report", Description: "Files a report."}},
			`the action stage answered outside its contract: tool "final_report" has a name reserved for one of the orchestrator's own tools (final_report, agent__final_report, agent__progress_report)`},
		{"agent__progress_report", []*typev1.Tool{{Name: "agent__progress_report"}, calc},
			`the action stage answered outside its contract: tool "agent__progress_report" has a name reserved for one of the orchestrator's own tools`},
		{"two tools of one name", []*typev1.Tool{calc, calc},
			`the action stage answered outside its contract: two tools are named "calculator"`},
		{"a tool without a name", []*typev1.Tool{calc, {Description: "Does something."}},
			`the action stage answered outside its contract: tools[1] has no name`},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			actions := &replacementAction{tools: tc.tools}
			h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
				o.StageAddrs = map[string]string{
					mesh.Action: serveStage(t, mesh.Action, func(g *grpc.Server) { actionv1.RegisterActionServiceServer(g, actions) }),
				}
			})
			res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
			preflightViolation(t, res, tc.reason)
		})
	}
}

// replacementAction is an action stage in place of the mesh's that lists its tools and runs
// none.
type replacementAction struct {
	actionv1.UnimplementedActionServiceServer
	tools []*typev1.Tool
}

func (s *replacementAction) ListTools(context.Context, *actionv1.ListToolsRequest) (*actionv1.ListToolsResponse, error) {
	return &actionv1.ListToolsResponse{Tools: s.tools}, nil
}

// preflightViolation checks a run that a stage's answer outside its contract ended before any
// turn: FAILED_PREFLIGHT STAGE_CONTRACT_VIOLATION, not retryable, its error saying reason.
func preflightViolation(t *testing.T, res *typev1.RunResult, reason string) {
	t.Helper()
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT || res.GetExitReason() != orchestrator.ExitStageContractViolation {
		t.Fatalf("%s %s (%s), want FAILED_PREFLIGHT %s", res.GetOutcome(), res.GetExitReason(), res.GetError().GetMessage(), orchestrator.ExitStageContractViolation)
	}
	if !strings.Contains(res.GetError().GetMessage(), reason) || res.GetError().GetRetryable() {
		t.Errorf("error %q retryable=%v, want it to say %q, not retryable", res.GetError().GetMessage(), res.GetError().GetRetryable(), reason)
	}
	if res.GetTurns() != 0 || res.GetFinalReport().GetContent() != orchestrator.MessageProviderFailure {
		t.Errorf("%d turns, report %q; want none and %q", res.GetTurns(), res.GetFinalReport().GetContent(), orchestrator.MessageProviderFailure)
	}
	checkInvariants(t, res)
}

// TestOutOfContractContext: a replacement context stage that assembles no messages for a turn
// is outside the context contract (the newest message is always kept): the run ends at that
// turn as FAILED_PROVIDER STAGE_CONTRACT_VIOLATION, its error naming the context stage, and
// asks no model; it was an LLM_ERROR the generation stage seemed to have made ("messages must
// not be empty"), after asking recovery what to do about the model.
func TestOutOfContractContext(t *testing.T) {
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Context: serveStage(t, mesh.Context, func(g *grpc.Server) {
				contextv1.RegisterContextServiceServer(g, emptyContext{})
			}),
		}
	})
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER ||
		res.GetExitReason() != orchestrator.ExitStageContractViolation {
		t.Fatalf("%s %s (%s), want FAILED_PROVIDER %s", res.GetOutcome(), res.GetExitReason(),
			res.GetError().GetMessage(), orchestrator.ExitStageContractViolation)
	}
	const want = "the context stage answered outside its contract: no messages"
	if e := res.GetError(); !strings.Contains(e.GetMessage(), want) || e.GetRetryable() {
		t.Errorf("error %q retryable=%v, want it to say %q, not retryable", e.GetMessage(),
			e.GetRetryable(), want)
	}
	for _, e := range res.GetAccounting() {
		if e.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_LLM {
			t.Errorf("an LLM request was made for a turn without messages: %v", e)
		}
	}
	checkInvariants(t, res)
}

// emptyContext is a context stage in place of the mesh's that assembles no messages.
type emptyContext struct {
	contextv1.UnimplementedContextServiceServer
}

func (emptyContext) Assemble(
	context.Context, *contextv1.AssembleRequest,
) (*contextv1.AssembleResponse, error) {
	return &contextv1.AssembleResponse{}, nil
}

// TestOutOfContractObservation: a replacement observation stage that observes a tool's result
// as nothing (an empty observation, where the contract gives the result, its summary or
// truncation, or "(tool failed: <reason>)") is outside the observation contract: the run ends
// at that turn as FAILED_PROVIDER STAGE_CONTRACT_VIOLATION, its error naming the observation
// stage and the tool, and the model is not asked again; it went on with an empty tool result
// and completed, its answer not holding the result it never saw.
func TestOutOfContractObservation(t *testing.T) {
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Observation: serveStage(t, mesh.Observation, func(g *grpc.Server) {
				observationv1.RegisterObservationServiceServer(g, blindObservation{})
			}),
		}
	})
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER ||
		res.GetExitReason() != orchestrator.ExitStageContractViolation {
		t.Fatalf("%s %s (%s): %q, want FAILED_PROVIDER %s", res.GetOutcome(), res.GetExitReason(),
			res.GetError().GetMessage(), res.GetFinalReport().GetContent(),
			orchestrator.ExitStageContractViolation)
	}
	const want = "the observation stage answered outside its contract: " +
		"no observation of the result of calculator"
	if e := res.GetError(); !strings.Contains(e.GetMessage(), want) || e.GetRetryable() {
		t.Errorf("error %q retryable=%v, want it to say %q, not retryable", e.GetMessage(),
			e.GetRetryable(), want)
	}
	llm := 0
	for _, e := range res.GetAccounting() {
		if e.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_LLM {
			llm++
		}
	}
	if llm != 1 || res.GetToolCalls() != 1 {
		t.Errorf("%d LLM requests, %d tool calls; want the one that called the calculator, and it",
			llm, res.GetToolCalls())
	}
	checkInvariants(t, res)
}

// blindObservation is an observation stage in place of the mesh's that observes nothing.
type blindObservation struct {
	observationv1.UnimplementedObservationServiceServer
}

func (blindObservation) Observe(
	context.Context, *observationv1.ObserveRequest,
) (*observationv1.ObserveResponse, error) {
	return &observationv1.ObserveResponse{ShouldContinue: true}, nil
}

// TestOutOfContractToolNumbers: a replacement action stage that answers a call with a negative
// execution_time_ms and attempts does not put them in the run's audited accounting: the entry
// has the time the orchestrator measured and no attempts, and the log says the action stage
// answered outside its contract. They were copied as they came (latency_ms -5, attempts -3).
func TestOutOfContractToolNumbers(t *testing.T) {
	schema, err := structpb.NewStruct(map[string]any{"type": "object",
		"properties": map[string]any{"expression": map[string]any{"type": "string"}}})
	if err != nil {
		t.Fatal(err)
	}
	actions := &negativeAction{replacementAction{tools: []*typev1.Tool{
		{Name: "calculator", Description: "Evaluates an arithmetic expression.", InputSchema: schema},
	}}}
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Action: serveStage(t, mesh.Action, func(g *grpc.Server) {
				actionv1.RegisterActionServiceServer(g, actions)
			}),
		}
	})
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	if !res.GetSuccess() || res.GetToolCalls() != 1 {
		t.Fatalf("%s %s (%s) with %d tool calls, want a completed run with one", res.GetOutcome(),
			res.GetExitReason(), res.GetError().GetMessage(), res.GetToolCalls())
	}
	for _, e := range res.GetAccounting() {
		if e.GetType() == typev1.AccountingType_ACCOUNTING_TYPE_TOOL &&
			(e.GetLatencyMs() < 0 || e.GetAttempts() < 0) {
			t.Errorf("tool entry latency_ms %d, attempts %d; want neither negative",
				e.GetLatencyMs(), e.GetAttempts())
		}
	}
	const want = "the action stage answered outside its contract: execution_time_ms -5 and attempts -3"
	if !strings.Contains(h.logs.String(), want) {
		t.Errorf("the log does not say %q", want)
	}
}

// negativeAction is an action stage in place of the mesh's that answers every call with its
// result, 42, and negative numbers of its execution.
type negativeAction struct{ replacementAction }

func (*negativeAction) Execute(
	context.Context, *actionv1.ExecuteRequest,
) (*actionv1.ExecuteResponse, error) {
	return &actionv1.ExecuteResponse{Status: typev1.ToolStatus_TOOL_STATUS_SUCCESS, Result: "42",
		ExecutionTimeMs: -5, Attempts: -3}, nil
}

// TestOutOfContractQuestion: a recovery stage that decides to ask the user without saying
// what (ask_user with no user_message, which its contract says is always set) does not leave
// the user an empty question: the run asks how to proceed in words of its own, and the
// answer reaches the model.
func TestOutOfContractQuestion(t *testing.T) {
	const message, answer = "Export everything now.", "Only the first page."
	tools := staticTools(t, map[string]string{"export": strings.Repeat("row\n", 75)})
	cfg := config.Default()
	cfg.Observation.MaxInputBytes = 100
	cfg.RestTools = map[string]config.RestTool{"export": {Description: "Exports every record.", URL: tools.URL + "/export"}}
	h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Recovery: serveStage(t, mesh.Recovery, func(g *grpc.Server) { recoveryv1.RegisterRecoveryServiceServer(g, muteRecovery{}) }),
		}
	}, exportScenario(message, "Here is the first page."))
	res := h.run(t, &agentv1.RunRequest{Message: message})
	q := res.GetPendingQuestion()
	if res.GetOutcome() != typev1.Outcome_OUTCOME_AWAITING_INPUT || q.GetQuestion() != orchestrator.MessageHowToProceed {
		t.Fatalf("outcome %s %s, question %q; want a pause asking %q", res.GetOutcome(), res.GetExitReason(), q.GetQuestion(), orchestrator.MessageHowToProceed)
	}
	if d := res.GetDecision(); d.GetClarificationQuestion() != orchestrator.MessageHowToProceed {
		t.Errorf("decision %v", d)
	}
	if _, err := h.client.Answer(t.Context(), &agentv1.AnswerRequest{RunId: res.GetRunId(), Answer: answer, QuestionId: q.GetId()}); err != nil {
		t.Fatal(err)
	}
	final, _ := h.finish(t, res.GetRunId())
	if !final.GetSuccess() {
		t.Fatalf("outcome %s %s (%v)", final.GetOutcome(), final.GetExitReason(), final.GetError())
	}
	reqs := requestsFor(h.llm, message)
	msgs := reqs[len(reqs)-1].Messages
	if question, reply := msgs[len(msgs)-2], msgs[len(msgs)-1]; string(question.Content) != orchestrator.MessageHowToProceed || string(reply.Content) != answer {
		t.Errorf("the model's last request ends with %q, %q; want the question and the answer", question.Content, reply.Content)
	}
}

// muteRecovery is a recovery stage outside its contract: it asks the user about every
// failure, without a user_message.
type muteRecovery struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (muteRecovery) Decide(context.Context, *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_ASK_USER}, nil
}

// TestOutOfContractSilentAbort: a recovery stage that aborts a malformed tool result
// (PARSE_ERROR) without saying so to the user (abort with no user_message, which its contract
// says is always set) does not leave the user an empty final report: the run ends
// FAILED_VALIDATION / TOOL_RESULT_INVALID in words of its own.
func TestOutOfContractSilentAbort(t *testing.T) {
	const message = "How warm is it outside?"
	tools := staticTools(t, map[string]string{"weather": "Sunny, 21 degrees."})
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"weather": {Description: "Weather as JSON.", URL: tools.URL + "/weather",
		OutputSchema: map[string]any{"type": "object", "required": []any{"temperature"}}}}
	h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{
			mesh.Recovery: serveStage(t, mesh.Recovery, func(g *grpc.Server) { recoveryv1.RegisterRecoveryServiceServer(g, silentRecovery{}) }),
		}
	}, llmtest.Scenario{Match: message, Turns: []llmtest.Turn{call("weather", `{}`), text("never asked")}})
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_VALIDATION || res.GetExitReason() != orchestrator.ExitToolResultInvalid {
		t.Fatalf("outcome %s %s (%v), want FAILED_VALIDATION TOOL_RESULT_INVALID", res.GetOutcome(), res.GetExitReason(), res.GetError())
	}
	if got := res.GetFinalReport().GetContent(); got != orchestrator.MessageProviderFailure || res.GetError().GetMessage() == "" {
		t.Errorf("final report %q, error %v; want %q and the failure", got, res.GetError(), orchestrator.MessageProviderFailure)
	}
}

// silentRecovery is a recovery stage outside its contract: it aborts on every failure,
// without a user_message.
type silentRecovery struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (silentRecovery) Decide(context.Context, *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_ABORT}, nil
}

// TestAWhitespaceResultIsObserved: a tool whose result is white space alone (a line break) is
// observed as it is by the mesh's observation stage, and the run goes on; the check of the
// observation contract took that observation, blank once trimmed, for none, and ended the run
// STAGE_CONTRACT_VIOLATION blaming the observation stage.
func TestAWhitespaceResultIsObserved(t *testing.T) {
	blank := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("\n\n"))
	}))
	t.Cleanup(blank.Close)
	cfg := config.Default()
	cfg.RestTools = map[string]config.RestTool{"lookup": {Description: "Looks the answer up.", URL: blank.URL}}
	h := start(t, cfg, llmtest.Scenario{Name: "blank tool", Match: "look it up", Turns: []llmtest.Turn{
		call("lookup", `{}`), text("The lookup returned nothing."),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: "look it up"})
	if !res.GetSuccess() {
		t.Fatalf("outcome %s %s (%s), want a success", res.GetOutcome(), res.GetExitReason(),
			res.GetError().GetMessage())
	}
	checkInvariants(t, res)
}

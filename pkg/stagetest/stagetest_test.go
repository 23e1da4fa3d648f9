package stagetest_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/stagetest"
	"github.com/agentmesh/agentmesh/services/action"
	"github.com/agentmesh/agentmesh/services/assembly"
	"github.com/agentmesh/agentmesh/services/generation"
	"github.com/agentmesh/agentmesh/services/intent"
	"github.com/agentmesh/agentmesh/services/memory"
	"github.com/agentmesh/agentmesh/services/observation"
	"github.com/agentmesh/agentmesh/services/planning"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunReportsEveryCase: the report has one result per case of the table, in order; the
// planning stage without a health service fails only the health case, saying why.
func TestRunReportsEveryCase(t *testing.T) {
	conn := grpctest.Serve(t, planning.New(planning.Options{}).Register)
	report, err := stagetest.Run(t.Context(), "planning", conn)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := stagetest.Cases("planning")
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Results) != len(cases) || report.Stage != "planning" {
		t.Fatalf("%s: %d results, want %d", report.Stage, len(report.Results), len(cases))
	}
	for i, res := range report.Results {
		if res.Case != cases[i].Case {
			t.Errorf("result %d is %s, want %s", i, res.Case, cases[i].Case)
		}
		if wantPass := res.Case != "health"; res.Pass != wantPass {
			t.Errorf("%s: pass=%v (%s), want %v", res.Case, res.Pass, res.Reason, wantPass)
		}
	}
	if h := report.Results[0]; !strings.Contains(h.Reason, "Unimplemented") {
		t.Errorf("health reason %q does not say the health service is missing", h.Reason)
	}
	if report.Passed() || report.Failed() != 1 {
		t.Errorf("Passed=%v Failed=%d, want false and 1", report.Passed(), report.Failed())
	}
}

// TestRunUnreachable: nothing listening is ErrUnreachable, not a report of failures; an
// unknown stage is an error naming the stages there are.
func TestRunUnreachable(t *testing.T) {
	conn, err := grpc.NewClient(grpctest.FreeAddr(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := stagetest.Run(t.Context(), "planning", conn); !errors.Is(err, stagetest.ErrUnreachable) {
		t.Errorf("err = %v, want ErrUnreachable", err)
	}
	if _, err := stagetest.Run(t.Context(), "nope", conn); err == nil || !strings.Contains(err.Error(), "intent, planning, context") {
		t.Errorf("err = %v, want an unknown stage naming the stages", err)
	}
}

// TestName: a stage's alias names the stage ("agent" is the orchestrator, whose table has
// cases of its own); an unknown name is an error.
func TestName(t *testing.T) {
	for name, want := range map[string]string{"planning": "planning", "orchestrator": "orchestrator", "agent": "orchestrator"} {
		if got, err := stagetest.Name(name); got != want || err != nil {
			t.Errorf("Name(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := stagetest.Name("nope"); err == nil {
		t.Error(`Name("nope") is not an error`)
	}
	cases, err := stagetest.Cases("agent")
	if err != nil || len(cases) < 2 || cases[0].Case != "health" || !strings.Contains(cases[0].Reason, "agentmesh.agent.v1.AgentService") {
		t.Errorf("Cases(agent) = %v, %v; want the public API's table", cases, err)
	}
}

// TestProviderCasesFailAMisclassifyingStage: with a provider address the generation table has
// its provider cases, which a stage that reports its provider's failures as UNAVAILABLE without
// their class (and a rate limit without its delay) fails, each saying what is wrong: the gRPC
// code, the class, the delay. Without one they are not in the table.
func TestProviderCasesFailAMisclassifyingStage(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { generationv1.RegisterGenerationServiceServer(s, classless{}) })
	opts := stagetest.Options{ProviderAddr: grpctest.FreeAddr(t)}
	report, err := stagetest.RunWith(t.Context(), "generation", conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := stagetest.CasesWith("generation", opts)
	if err != nil || len(report.Results) != len(cases) {
		t.Fatalf("%d results, want %d (%v)", len(report.Results), len(cases), err)
	}
	verdicts := byCase(report)
	if res := verdicts["provider-answer"]; !res.Pass {
		t.Errorf("provider-answer failed: %s", res.Reason)
	}
	for name, want := range map[string]string{
		"provider-auth":                "gRPC code Unavailable, want PermissionDenied",
		"provider-server-error":        "error_class UNSPECIFIED, want SERVER",
		"provider-server-error-stream": "error_class UNSPECIFIED, want SERVER",
		"provider-rate-limited":        "retry_after_ms 0, want 2000",
		"provider-bad-request":         "gRPC code Unavailable, want InvalidArgument",
	} {
		if res := verdicts[name]; res.Pass || !strings.Contains(res.Reason, want) {
			t.Errorf("%s: pass=%v %q, want a failure saying %q", name, res.Pass, res.Reason, want)
		}
	}
	plain, err := stagetest.Cases("generation")
	if err != nil || slices.ContainsFunc(plain, func(r stagetest.Result) bool { return strings.HasPrefix(r.Case, "provider-") }) {
		t.Errorf("Cases(generation) = %v, %v; want no provider case without a provider address", plain, err)
	}
}

// classless is a generation stage that answers the kit's provider-answer case and reports
// every other request of the kit's provider target as a generation failure without a class:
// a rate limit RESOURCE_EXHAUSTED without its delay, anything else UNAVAILABLE.
type classless struct {
	generationv1.UnimplementedGenerationServiceServer
}

func (classless) Generate(_ context.Context, req *generationv1.GenerateRequest) (*generationv1.GenerateResponse, error) {
	if len(req.GetMessages()) == 0 {
		return nil, stageerr.Invalid("messages must not be empty")
	}
	msg := req.GetMessages()[len(req.GetMessages())-1].GetContent()
	if strings.HasSuffix(msg, "provider-answer") {
		return &generationv1.GenerateResponse{Type: generationv1.ResponseType_RESPONSE_TYPE_MESSAGE, Content: "Hello from the conformance kit."}, nil
	}
	class := typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED
	if strings.HasSuffix(msg, "rate-limited") {
		class = typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED
	}
	return nil, stageerr.Generation(class, 0, "the provider failed")
}

func (g classless) GenerateStream(in *generationv1.GenerateStreamRequest, _ grpc.ServerStreamingServer[generationv1.GenerateStreamResponse]) error {
	_, err := g.Generate(context.Background(), in.GetRequest())
	return err
}

// TestRecoveryCasesFailAStageThatGivesUpOnTheModel: a recovery stage that aborts a run on a
// model's network, timeout or server failure, and waits a minute on the same target after a
// first rate limit, fails the kit's cases for them (seed 000 §3: the next target at once),
// which it passed: every strategy and a wait up to a minute were allowed.
func TestRecoveryCasesFailAStageThatGivesUpOnTheModel(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { recoveryv1.RegisterRecoveryServiceServer(s, givesUp{}) })
	report, err := stagetest.Run(t.Context(), "recovery", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	for name, want := range map[string]string{
		"network-next-target":    "strategy STRATEGY_ABORT",
		"timeout-next-target":    "strategy STRATEGY_ABORT",
		"server-next-target":     "strategy STRATEGY_ABORT",
		"rate-limit-next-target": "backoff_ms 60000, want 0",
	} {
		if res := verdicts[name]; res.Pass || !strings.Contains(res.Reason, want) {
			t.Errorf("%s: pass=%v %q, want a failure saying %q", name, res.Pass, res.Reason, want)
		}
	}
}

// givesUp is a recovery stage that aborts on every failure of the model but a rate limit,
// after which it waits a minute on the same target.
type givesUp struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (givesUp) Decide(_ context.Context, req *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	if req.GetError().GetErrorClass() == typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED {
		return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_RETRY, BackoffMs: 60_000, UserMessage: "Waiting.",
			ModifiedAction: &recoveryv1.ModifiedAction{Target: req.GetState().GetTarget()}}, nil
	}
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_ABORT, UserMessage: "Giving up."}, nil
}

// TestContextCasesFailAStageThatSplitsCallsFromResults: a context stage that keeps calls and
// drops their results, and reports no guard, fails the kit's tool-pairs and guard cases,
// saying why; it passed the table, which had no call in a history and no context window.
func TestContextCasesFailAStageThatSplitsCallsFromResults(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { contextv1.RegisterContextServiceServer(s, splitsPairs{}) })
	report, err := stagetest.Run(t.Context(), "context", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	for name, want := range map[string]string{"tool-pairs": `calls "c1" without its result`, "guard": "no guard"} {
		if res := verdicts[name]; res.Pass || !strings.Contains(res.Reason, want) {
			t.Errorf("%s: pass=%v %q, want a failure saying %q", name, res.Pass, res.Reason, want)
		}
	}
}

// splitsPairs is a context stage that returns the history without its tool results, and no
// guard.
type splitsPairs struct {
	contextv1.UnimplementedContextServiceServer
}

func (splitsPairs) Assemble(_ context.Context, req *contextv1.AssembleRequest) (*contextv1.AssembleResponse, error) {
	if req.GetMaxTokens() <= 0 {
		return nil, stageerr.Invalid("max_tokens must be positive")
	}
	if len(req.GetHistory()) == 0 {
		return nil, stageerr.Invalid("history must not be empty")
	}
	var kept []*typev1.Message
	for _, m := range req.GetHistory() {
		if m.GetRole() == typev1.Role_ROLE_UNSPECIFIED {
			return nil, stageerr.Invalid("history[0].role must be set")
		}
		if m.GetRole() != typev1.Role_ROLE_TOOL {
			kept = append(kept, m)
		}
	}
	return &contextv1.AssembleResponse{Messages: kept, TokenCount: 1}, nil
}

// byCase is a report's results by case name.
func byCase(report stagetest.Report) map[string]stagetest.Result {
	out := make(map[string]stagetest.Result, len(report.Results))
	for _, res := range report.Results {
		out[res.Case] = res
	}
	return out
}

// TestActionCasesFailAStageThatKeysCallsByCallID: an action stage that records its calls by
// call_id alone, so that a call_1 of one run answers with the result of another run's call_1,
// fails the kit's call-scoped-to-run case, saying why; it passed the table, whose repeated
// call was of one run.
func TestActionCasesFailAStageThatKeysCallsByCallID(t *testing.T) {
	svc, err := action.New(action.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { actionv1.RegisterActionServiceServer(s, callIDOnly{svc}) })
	report, err := stagetest.Run(t.Context(), "action", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	if res := verdicts["call-scoped-to-run"]; res.Pass || !strings.Contains(res.Reason, "answered cached") {
		t.Errorf("call-scoped-to-run: pass=%v %q, want a failure saying the other run's call answered cached", res.Pass, res.Reason)
	}
	for _, res := range report.Results {
		if !res.Pass && res.Case != "health" && res.Case != "call-scoped-to-run" {
			t.Errorf("%s failed: %s", res.Case, res.Reason)
		}
	}
}

// TestActionCasesFailAStageThatListsAReservedName: an action stage that lists a tool named
// final_report, the orchestrator's own tool, fails the kit's lists-builtins case, saying which
// tool: the orchestrator refuses such a list (STAGE_CONTRACT_VIOLATION).
func TestActionCasesFailAStageThatListsAReservedName(t *testing.T) {
	svc, err := action.New(action.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { actionv1.RegisterActionServiceServer(s, withFinalReport{svc}) })
	report, err := stagetest.Run(t.Context(), "action", conn)
	if err != nil {
		t.Fatal(err)
	}
	want := `tool "final_report" has a name reserved for one of the orchestrator's own tools`
	if res := byCase(report)["lists-builtins"]; res.Pass || !strings.Contains(res.Reason, want) {
		t.Errorf("lists-builtins: pass=%v %q, want a failure saying %q", res.Pass, res.Reason, want)
	}
}

// withFinalReport is the project's action stage behind a front that lists a tool named
// final_report too.
type withFinalReport struct{ *action.Service }

func (s withFinalReport) ListTools(ctx context.Context, req *actionv1.ListToolsRequest) (*actionv1.ListToolsResponse, error) {
	resp, err := s.Service.ListTools(ctx, req)
	if err == nil {
		resp.Tools = append(resp.Tools, &typev1.Tool{Name: "final_report"})
	}
	return resp, err
}

// callIDOnly is the project's action stage behind a front that files every call under one
// run, as a stage that keys its calls by call_id alone does.
type callIDOnly struct{ *action.Service }

func (s callIDOnly) Execute(ctx context.Context, req *actionv1.ExecuteRequest) (*actionv1.ExecuteResponse, error) {
	if runid.Check(req.GetRunId()) == nil { // an id the stage refuses stays refused
		req.RunId = "every-run"
	}
	return s.Service.Execute(ctx, req)
}

// TestRecoveryCasesFailAStageThatRetriesEveryTimeout: a recovery stage that retries every
// timed-out tool with a longer timeout, whether or not the tool may run again, fails the kit's
// timeout-not-idempotent case; it passed the table, whose only timed-out tool was idempotent.
// It keeps the default budget of 3 retries whatever state.max_retries says, and fails
// retry-budget-of-state; it passed the table, which asked only about the default budget.
func TestRecoveryCasesFailAStageThatRetriesEveryTimeout(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { recoveryv1.RegisterRecoveryServiceServer(s, retriesTimeouts{}) })
	report, err := stagetest.Run(t.Context(), "recovery", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	for name, want := range map[string]string{
		"timeout-not-idempotent": "STRATEGY_RETRY with timeout_ms 2000 of a tool that is not idempotent",
		"retry-budget-of-state":  "STRATEGY_RETRY after 1 retry, and state.max_retries is 1",
	} {
		if res := verdicts[name]; res.Pass || !strings.Contains(res.Reason, want) {
			t.Errorf("%s: pass=%v %q, want a failure saying %q", name, res.Pass, res.Reason, want)
		}
	}
	for _, name := range []string{"timeout-longer", "retry-budget"} {
		if res := verdicts[name]; !res.Pass {
			t.Errorf("%s failed: %s", name, res.Reason)
		}
	}
}

// retriesTimeouts is a recovery stage that retries a timed-out tool with twice its timeout
// until the default budget of 3 retries is spent, whatever the request says of the tool and
// its budget, and aborts on any other failure.
type retriesTimeouts struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (retriesTimeouts) Decide(_ context.Context, req *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	if req.GetError().GetCode() == typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT && req.GetRetryCount() < 3 {
		return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_RETRY, UserMessage: "Trying again.",
			ModifiedAction: &recoveryv1.ModifiedAction{TimeoutMs: 2 * req.GetState().GetTimeoutMs()}}, nil
	}
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_ABORT, UserMessage: "Giving up."}, nil
}

// TestMemoryCasesFailAStageThatDeletesAnyonesMemory: a memory stage that deletes a memory by
// its id, for whichever user asks, fails the kit's delete-isolated case, saying why; it passed
// the table, whose isolation case only searched and listed.
func TestMemoryCasesFailAStageThatDeletesAnyonesMemory(t *testing.T) {
	svc := memory.New(memory.Options{})
	t.Cleanup(func() { _ = svc.Close() })
	stage := &deletesByID{Service: svc, owners: map[string]string{}}
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { memoryv1.RegisterMemoryServiceServer(s, stage) })
	report, err := stagetest.Run(t.Context(), "memory", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	if res := verdicts["delete-isolated"]; res.Pass || !strings.Contains(res.Reason, "(deleted=true)") {
		t.Errorf("delete-isolated: pass=%v %q, want a failure saying the other user deleted it", res.Pass, res.Reason)
	}
	for _, res := range report.Results {
		if !res.Pass && res.Case != "health" && res.Case != "delete-isolated" {
			t.Errorf("%s failed: %s", res.Case, res.Reason)
		}
	}
}

// deletesByID is the project's memory stage behind a front that deletes a memory for its
// owner whoever asks, as a stage that deletes by memory id alone does.
type deletesByID struct {
	*memory.Service
	mu     sync.Mutex
	owners map[string]string // memory id → the user it was stored for
}

func (s *deletesByID) Store(ctx context.Context, req *memoryv1.StoreRequest) (*memoryv1.StoreResponse, error) {
	resp, err := s.Service.Store(ctx, req)
	if err == nil {
		s.mu.Lock()
		s.owners[resp.GetMemoryId()] = req.GetUserId()
		s.mu.Unlock()
	}
	return resp, err
}

func (s *deletesByID) Delete(ctx context.Context, req *memoryv1.DeleteRequest) (*memoryv1.DeleteResponse, error) {
	s.mu.Lock()
	owner, ok := s.owners[req.GetMemoryId()]
	s.mu.Unlock()
	if ok {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(auth.UserMetadata, owner))
		req = &memoryv1.DeleteRequest{UserId: owner, MemoryId: req.GetMemoryId()}
	}
	return s.Service.Delete(ctx, req)
}

// TestContextCasesFailAStageBlindToTools: a context stage whose guard counts only the counters
// the request gives, not the tools it offers (the orchestrator sends no schema counter: the
// stage counts the tools), fails the kit's guard-counts-tools case, saying why; it passed the
// table, whose guard case gave the schema counter.
func TestContextCasesFailAStageBlindToTools(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		contextv1.RegisterContextServiceServer(s, toolBlind{assembly.New(assembly.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "context", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	if res := verdicts["guard-counts-tools"]; res.Pass || !strings.Contains(res.Reason, "guard schema 0, schema_tokens 0") {
		t.Errorf("guard-counts-tools: pass=%v %q, want a failure saying the schemas were not counted", res.Pass, res.Reason)
	}
	for _, res := range report.Results {
		if !res.Pass && res.Case != "health" && res.Case != "guard-counts-tools" {
			t.Errorf("%s failed: %s", res.Case, res.Reason)
		}
	}
}

// toolBlind is the project's context stage behind a front that drops the request's tools.
type toolBlind struct{ *assembly.Service }

func (s toolBlind) Assemble(ctx context.Context, req *contextv1.AssembleRequest) (*contextv1.AssembleResponse, error) {
	req.Tools = nil
	return s.Service.Assemble(ctx, req)
}

// TestContextCasesFailAStageWithoutTheRatio: a context stage that ignores
// force_synthesis_at_ratio, which the orchestrator leaves to it, fails the kit's guard-ratio
// case, saying why; it passed the table, which never set the ratio.
func TestContextCasesFailAStageWithoutTheRatio(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		contextv1.RegisterContextServiceServer(s, ratioBlind{assembly.New(assembly.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "context", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	if res := verdicts["guard-ratio"]; res.Pass || !strings.Contains(res.Reason, "guard verdict GUARD_VERDICT_OK for projected 1100") {
		t.Errorf("guard-ratio: pass=%v %q, want a failure saying the guard let 1100 pass", res.Pass, res.Reason)
	}
	for _, res := range report.Results {
		if !res.Pass && res.Case != "health" && res.Case != "guard-ratio" {
			t.Errorf("%s failed: %s", res.Case, res.Reason)
		}
	}
}

// ratioBlind is the project's context stage behind a front that drops the request's
// force_synthesis_at_ratio.
type ratioBlind struct{ *assembly.Service }

func (s ratioBlind) Assemble(ctx context.Context, req *contextv1.AssembleRequest) (*contextv1.AssembleResponse, error) {
	req.ForceSynthesisAtRatio = 0
	return s.Service.Assemble(ctx, req)
}

// TestPlanningCasesFailAStageThatNamesNothing: a planning stage that refuses invalid input
// as INVALID_INPUT with a message naming nothing ("invalid request") fails the kit's
// duplicate-step-id case, which must see the repeated id named; it passed, since the id the
// case looked for, "id", is in the word "invalid".
func TestPlanningCasesFailAStageThatNamesNothing(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		planningv1.RegisterPlanningServiceServer(s, namesNothing{planning.New(planning.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "planning", conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := byCase(report)["duplicate-step-id"]; res.Pass || !strings.Contains(res.Reason, `the message does not name "twice"`) {
		t.Errorf("duplicate-step-id: pass=%v %q, want a failure saying the message does not name the id", res.Pass, res.Reason)
	}
}

// namesNothing is the project's planning stage behind a front that words every INVALID_INPUT
// failure "invalid request".
type namesNothing struct{ *planning.Service }

func (s namesNothing) Plan(ctx context.Context, req *planningv1.PlanRequest) (*planningv1.PlanResponse, error) {
	resp, err := s.Service.Plan(ctx, req)
	if err != nil && errors.Is(stageerr.FromError(err), stageerr.ErrInvalidInput) {
		return nil, stageerr.Invalid("invalid request")
	}
	return resp, err
}

// TestIntentCasesFailAStageWithABlankGoal: an intent stage whose goal is blank (a model that
// answered a newline) fails the kit's goal cases, as the orchestrator ends such a run
// STAGE_CONTRACT_VIOLATION; only an empty goal failed them.
func TestIntentCasesFailAStageWithABlankGoal(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		intentv1.RegisterIntentServiceServer(s, blankGoal{intent.New(intent.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "intent", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	for _, name := range []string{"goal-and-task-type", "goal-never-empty"} {
		if res := verdicts[name]; res.Pass || !strings.Contains(res.Reason, `the goal "\n" is empty`) {
			t.Errorf("%s: pass=%v %q, want a failure saying the goal is empty", name, res.Pass, res.Reason)
		}
	}
}

// blankGoal is the project's intent stage behind a front that blanks every goal.
type blankGoal struct{ *intent.Service }

func (s blankGoal) Parse(ctx context.Context, req *intentv1.ParseRequest) (*intentv1.ParseResponse, error) {
	resp, err := s.Service.Parse(ctx, req)
	if err == nil {
		resp.Goal = "\n"
	}
	return resp, err
}

// TestMemoryCasesFailAStageThatDropsTranscripts: a memory stage that keeps a saved run's
// result without its transcript fails the kit's save-and-get-run case, saying why; it passed
// the case, whose run had no transcript.
func TestMemoryCasesFailAStageThatDropsTranscripts(t *testing.T) {
	svc := memory.New(memory.Options{})
	t.Cleanup(func() { _ = svc.Close() })
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { memoryv1.RegisterMemoryServiceServer(s, dropsTranscripts{svc}) })
	report, err := stagetest.Run(t.Context(), "memory", conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := byCase(report)["save-and-get-run"]; res.Pass || !strings.Contains(res.Reason, "a transcript of 0 entries, want the 2 saved") {
		t.Errorf("save-and-get-run: pass=%v %q, want a failure saying the transcript is gone", res.Pass, res.Reason)
	}
}

// dropsTranscripts is the project's memory stage behind a front that saves a run's result
// without its transcript.
type dropsTranscripts struct{ *memory.Service }

func (s dropsTranscripts) SaveRun(ctx context.Context, req *memoryv1.SaveRunRequest) (*memoryv1.SaveRunResponse, error) {
	req.GetResult().Transcript = nil
	return s.Service.SaveRun(ctx, req)
}

// TestMemoryCasesFailAStageWithoutDocuments: a memory stage without StoreDocument (one built
// before it) fails the kit's store-document-replaces case, saying what ingestion then risks;
// so does one whose StoreDocument adds the chunks beside the document's earlier ones.
func TestMemoryCasesFailAStageWithoutDocuments(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stage  func(*memory.Service) memoryv1.MemoryServiceServer
		reason string
	}{
		{"unimplemented", func(s *memory.Service) memoryv1.MemoryServiceServer { return noDocuments{s} },
			"can leave both versions"},
		{"appends", func(s *memory.Service) memoryv1.MemoryServiceServer { return &appendsDocuments{Service: s} },
			"want the first's memory_ids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := memory.New(memory.Options{})
			t.Cleanup(func() { _ = svc.Close() })
			conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { memoryv1.RegisterMemoryServiceServer(s, tc.stage(svc)) })
			report, err := stagetest.Run(t.Context(), "memory", conn)
			if err != nil {
				t.Fatal(err)
			}
			if res := byCase(report)["store-document-replaces"]; res.Pass || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("store-document-replaces: pass=%v %q, want a failure saying %q", res.Pass, res.Reason, tc.reason)
			}
		})
	}
}

// noDocuments is the project's memory stage without StoreDocument, as a stage built before it.
type noDocuments struct{ *memory.Service }

func (noDocuments) StoreDocument(context.Context, *memoryv1.StoreDocumentRequest) (*memoryv1.StoreDocumentResponse, error) {
	return nil, status.Error(codes.Unimplemented, "method StoreDocument not implemented")
}

// appendsDocuments is the project's memory stage behind a front that stores each
// StoreDocument's chunks as a document of its own, beside the earlier ones.
type appendsDocuments struct {
	*memory.Service
	calls atomic.Int64
}

func (s *appendsDocuments) StoreDocument(ctx context.Context, req *memoryv1.StoreDocumentRequest) (*memoryv1.StoreDocumentResponse, error) {
	req.GetMetadata().GetFields()["folder"] = structpb.NewStringValue(fmt.Sprint(s.calls.Add(1)))
	return s.Service.StoreDocument(ctx, req)
}

// TestContextCasesFailAStageThatUndercounts: a context stage that fits the history into four
// times max_tokens and reports a token_count within max_tokens fails the kit's
// recency-within-budget case, saying why; it passed, as the kit took token_count on trust.
func TestContextCasesFailAStageThatUndercounts(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		contextv1.RegisterContextServiceServer(s, undercounts{assembly.New(assembly.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "context", conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := byCase(report)["recency-within-budget"]; res.Pass || !strings.Contains(res.Reason, "more than twice max_tokens 800") {
		t.Errorf("recency-within-budget: pass=%v %q, want a failure saying the messages do not fit", res.Pass, res.Reason)
	}
}

// undercounts is the project's context stage behind a front that assembles within four times
// max_tokens and reports at most max_tokens.
type undercounts struct{ *assembly.Service }

func (s undercounts) Assemble(ctx context.Context, req *contextv1.AssembleRequest) (*contextv1.AssembleResponse, error) {
	budget := req.GetMaxTokens()
	req.MaxTokens *= 4
	resp, err := s.Service.Assemble(ctx, req)
	if err == nil {
		resp.TokenCount = min(resp.GetTokenCount(), budget)
	}
	return resp, err
}

// TestContextCasesFailAStageThatHidesWhatItLeftOut: a context stage that leaves older history
// out to fit max_tokens and reports dropped_messages 0 fails the kit's recency-within-budget
// case, saying why: the orchestrator ends a run whose context leaves messages of the
// conversation out (seed 002 §6), and learns of it only from dropped_messages.
func TestContextCasesFailAStageThatHidesWhatItLeftOut(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		contextv1.RegisterContextServiceServer(s, hidesDropped{assembly.New(assembly.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "context", conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := byCase(report)["recency-within-budget"]; res.Pass || !strings.Contains(res.Reason, "dropped_messages 0") {
		t.Errorf("recency-within-budget: pass=%v %q, want a failure saying dropped_messages hides what was left out", res.Pass, res.Reason)
	}
}

// hidesDropped is the project's context stage behind a front that reports no message left out.
type hidesDropped struct{ *assembly.Service }

func (s hidesDropped) Assemble(ctx context.Context, req *contextv1.AssembleRequest) (*contextv1.AssembleResponse, error) {
	resp, err := s.Service.Assemble(ctx, req)
	if err == nil {
		resp.DroppedMessages = 0
	}
	return resp, err
}

// TestObservationCasesFailAStageThatStopsOnFailure: an observation stage that answers
// should_continue false for a failed tool, which makes the orchestrator's next turn final,
// fails the kit's failure-readable case, saying why; it passed, as the case read only success
// and the observation.
func TestObservationCasesFailAStageThatStopsOnFailure(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		observationv1.RegisterObservationServiceServer(s, stopsOnFailure{observation.New(observation.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "observation", conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := byCase(report)["failure-readable"]; res.Pass || !strings.Contains(res.Reason, "should_continue false after a failed calculator") {
		t.Errorf("failure-readable: pass=%v %q, want a failure saying should_continue is false", res.Pass, res.Reason)
	}
}

// stopsOnFailure is the project's observation stage behind a front that ends the loop after
// a failed tool.
type stopsOnFailure struct{ *observation.Service }

func (s stopsOnFailure) Observe(ctx context.Context, req *observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	resp, err := s.Service.Observe(ctx, req)
	if err == nil && !resp.GetSuccess() {
		resp.ShouldContinue = false
	}
	return resp, err
}

// TestMemoryCasesPassAStageThatEnforcesIsolation: the project's memory stage enforcing memory
// isolation (memory.Options.RequireUser, set when the public API authenticates its callers)
// passes every case: it failed unknown-run and empty-user, whose calls named no user
// (UNAUTHENTICATED), although the kit's calls name their user, as the orchestrator's do.
func TestMemoryCasesPassAStageThatEnforcesIsolation(t *testing.T) {
	svc := memory.New(memory.Options{RequireUser: true})
	t.Cleanup(func() { _ = svc.Close() })
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { memoryv1.RegisterMemoryServiceServer(s, svc) })
	report, err := stagetest.Run(t.Context(), "memory", conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range report.Results {
		if !res.Pass && res.Case != "health" {
			t.Errorf("%s failed: %s", res.Case, res.Reason)
		}
	}
}

// TestRecoveryCasesFailAStageThatForgetsRefusals: a recovery stage that sends a failed model
// request to the next target round-robin, whether or not that target refused the turn's
// request as invalid, fails the kit's rejected-targets-avoided case, saying why; it passed the
// table, whose requests named no refused target.
func TestRecoveryCasesFailAStageThatForgetsRefusals(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { recoveryv1.RegisterRecoveryServiceServer(s, roundRobin{}) })
	report, err := stagetest.Run(t.Context(), "recovery", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	if res := verdicts["rejected-targets-avoided"]; res.Pass || !strings.Contains(res.Reason, "strategy STRATEGY_FALLBACK to b/m, want the next target that has not refused") {
		t.Errorf("rejected-targets-avoided: pass=%v %q, want a failure saying b/m refused", res.Pass, res.Reason)
	}
	for _, name := range []string{"network-next-target", "server-next-target"} {
		if res := verdicts[name]; !res.Pass {
			t.Errorf("%s failed: %s", name, res.Reason)
		}
	}
}

// roundRobin is a recovery stage that falls back to the next of the run's targets on every
// failure of the model, at once.
type roundRobin struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (roundRobin) Decide(_ context.Context, req *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	targets := req.GetState().GetTargets()
	i := slices.IndexFunc(targets, func(t *typev1.Target) bool { return proto.Equal(t, req.GetState().GetTarget()) })
	if req.GetStage() != "generation" || len(targets) == 0 {
		return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_ABORT, UserMessage: "Giving up."}, nil
	}
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_FALLBACK, UserMessage: "Trying another model.",
		ModifiedAction: &recoveryv1.ModifiedAction{Target: targets[(i+1)%len(targets)]}}, nil
}

// TestRecoveryCasesFailAStageWithoutFallback: a recovery stage that gives up after the turn's
// last attempt without trying the run's fallback model fails the kit's fallback-model case,
// saying why; it passed the table, which named no fallback model.
func TestRecoveryCasesFailAStageWithoutFallback(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { recoveryv1.RegisterRecoveryServiceServer(s, patient{}) })
	report, err := stagetest.Run(t.Context(), "recovery", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	for name, want := range map[string]string{
		"fallback-model": "strategy STRATEGY_ABORT to / after 0 ms, want a fallback to the fallback target simple/small",
	} {
		if res := verdicts[name]; res.Pass || !strings.Contains(res.Reason, want) {
			t.Errorf("%s: pass=%v %q, want a failure saying %q", name, res.Pass, res.Reason, want)
		}
	}
}

// patient is a recovery stage that retries a rate-limited model request on the same target
// after its Retry-After, falls back to the next target at once after any other failure of the
// model but on the turn's last attempt, and aborts otherwise.
type patient struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (patient) Decide(ctx context.Context, req *recoveryv1.DecideRequest) (*recoveryv1.DecideResponse, error) {
	state := req.GetState()
	if req.GetError().GetErrorClass() == typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED {
		return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_RETRY, UserMessage: "Waiting.",
			BackoffMs: min(req.GetError().GetRetryAfterMs(), 60_000), ModifiedAction: &recoveryv1.ModifiedAction{Target: state.GetTarget()}}, nil
	}
	if req.GetStage() == "generation" && !state.GetLastAttempt() {
		return roundRobin{}.Decide(ctx, req)
	}
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_ABORT, UserMessage: "Giving up."}, nil
}

// TestRecoveryCasesFailAStageThatOutwaitsTheRun: a recovery stage that waits out a rate limit
// however long the run has left fails the kit's wait-outlasts-run case, saying why; it passed
// the table, which never said how long the run had left.
func TestRecoveryCasesFailAStageThatOutwaitsTheRun(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { recoveryv1.RegisterRecoveryServiceServer(s, patient{}) })
	report, err := stagetest.Run(t.Context(), "recovery", conn)
	if err != nil {
		t.Fatal(err)
	}
	want := "strategy STRATEGY_RETRY after 30000 ms, and the run has 1000 ms left"
	if res := byCase(report)["wait-outlasts-run"]; res.Pass || !strings.Contains(res.Reason, want) {
		t.Errorf("wait-outlasts-run: pass=%v %q, want a failure saying %q", res.Pass, res.Reason, want)
	}
}

// TestContextCasesFailAStageWithoutTheStep: a context stage that leaves the current step out
// of the context fails the kit's current-step-shown case, saying why; it passed the table,
// which never named a step.
func TestContextCasesFailAStageWithoutTheStep(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		contextv1.RegisterContextServiceServer(s, stepBlind{assembly.New(assembly.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "context", conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := byCase(report)["current-step-shown"]; res.Pass || !strings.Contains(res.Reason, "no message holds the current step's description") {
		t.Errorf("current-step-shown: pass=%v %q, want a failure saying the step is missing", res.Pass, res.Reason)
	}
}

// stepBlind is the project's context stage behind a front that drops the request's step and
// plan.
type stepBlind struct{ *assembly.Service }

func (s stepBlind) Assemble(ctx context.Context, req *contextv1.AssembleRequest) (*contextv1.AssembleResponse, error) {
	req.CurrentStep, req.Plan = nil, nil
	return s.Service.Assemble(ctx, req)
}

// TestIntentCasesFailAStageBlindToAvailableTools: an intent stage that reads a request for a
// tool without regard to the tools the run may use, so that asking for one it may not use
// makes a tool required, fails the kit's unavailable-tool-not-required case, saying why; it
// passed the table, which asked for no tool.
func TestIntentCasesFailAStageBlindToAvailableTools(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		intentv1.RegisterIntentServiceServer(s, toolsBlind{intent.New(intent.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "intent", conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := byCase(report)["unavailable-tool-not-required"]; res.Pass || !strings.Contains(res.Reason, "tool_policy TOOL_POLICY_REQUIRED for a request of web_search") {
		t.Errorf("unavailable-tool-not-required: pass=%v %q, want a failure saying the policy is required", res.Pass, res.Reason)
	}
}

// toolsBlind is the project's intent stage behind a front that offers it the tools a message
// asks for as well as the run's.
type toolsBlind struct{ *intent.Service }

func (s toolsBlind) Parse(ctx context.Context, req *intentv1.ParseRequest) (*intentv1.ParseResponse, error) {
	for _, word := range strings.Fields(req.GetMessage()) {
		if strings.Contains(word, "_") {
			req.AvailableTools = append(req.AvailableTools, word)
		}
	}
	return s.Service.Parse(ctx, req)
}

// TestOrchestratorCasesFailAnAPIThatForwardsMemoryCalls: a public API that answers the memory
// stage's deleted=false as a successful DeleteMemory and passes any ListMemories page_size on
// fails the kit's delete-unknown-memory and memories-page-size-over-limit cases, saying why;
// it passed the table, which had no memory case.
func TestOrchestratorCasesFailAnAPIThatForwardsMemoryCalls(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { agentv1.RegisterAgentServiceServer(s, forwardsMemory{}) })
	report, err := stagetest.Run(t.Context(), "orchestrator", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	for name, want := range map[string]string{
		"delete-unknown-memory":         "answered OK, want NotFound with StageError NOT_FOUND",
		"memories-page-size-over-limit": "answered OK, want InvalidArgument with StageError INVALID_INPUT",
	} {
		if res := verdicts[name]; res.Pass || !strings.Contains(res.Reason, want) {
			t.Errorf("%s: pass=%v %q, want a failure saying %q", name, res.Pass, res.Reason, want)
		}
	}
}

// forwardsMemory is a public API whose memory calls answer what a memory stage without the
// memory would: nothing listed, and a delete that deleted nothing, as a success.
type forwardsMemory struct {
	agentv1.UnimplementedAgentServiceServer
}

func (forwardsMemory) ListMemories(context.Context, *agentv1.ListMemoriesRequest) (*agentv1.ListMemoriesResponse, error) {
	return &agentv1.ListMemoriesResponse{}, nil
}

func (forwardsMemory) DeleteMemory(_ context.Context, req *agentv1.DeleteMemoryRequest) (*agentv1.DeleteMemoryResponse, error) {
	return &agentv1.DeleteMemoryResponse{MemoryId: req.GetMemoryId()}, nil
}

// TestObservationCasesFailAStageWithALimitOfItsOwn: an observation stage that truncates every
// result to a limit of its own when the request sets none (max_bytes 0, which a run's
// overrides.tool_response_max_bytes may ask for) fails the kit's no-limit case, saying why; it
// passed the table, whose requests all set a limit or sent a small result.
func TestObservationCasesFailAStageWithALimitOfItsOwn(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		observationv1.RegisterObservationServiceServer(s, limitOfItsOwn{observation.New(observation.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "observation", conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := byCase(report)["no-limit"]; res.Pass || !strings.Contains(res.Reason, "(truncated=true, summarized=false), want the whole result of 20000 bytes") {
		t.Errorf("no-limit: pass=%v %q, want a failure saying the result was truncated", res.Pass, res.Reason)
	}
}

// limitOfItsOwn is the project's observation stage behind a front that makes a request
// without max_bytes one of 4096.
type limitOfItsOwn struct{ *observation.Service }

func (s limitOfItsOwn) Observe(ctx context.Context, req *observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	if req.GetMaxBytes() == 0 {
		req.MaxBytes = 4096
	}
	return s.Service.Observe(ctx, req)
}

// TestGenerationCasesFailAStageThatLosesTheText: a generation stage that answers a text answer
// as RESPONSE_TYPE_DONE without its content (an answer the orchestrator can only retry) fails
// the kit's message-answer and stream-final-last cases, saying why; it passed them, which
// accepted any known type.
func TestGenerationCasesFailAStageThatLosesTheText(t *testing.T) {
	svc := generation.New(generation.Options{Providers: map[string]generation.Provider{"rules": generation.NewRules()}})
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) { generationv1.RegisterGenerationServiceServer(s, losesText{svc}) })
	report, err := stagetest.Run(t.Context(), "generation", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	for _, name := range []string{"message-answer", "stream-final-last"} {
		if res := verdicts[name]; res.Pass || !strings.Contains(res.Reason, `type RESPONSE_TYPE_DONE (content ""), want RESPONSE_TYPE_MESSAGE`) {
			t.Errorf("%s: pass=%v %q, want a failure saying the answer is empty", name, res.Pass, res.Reason)
		}
	}
	if res := verdicts["tool-call"]; !res.Pass {
		t.Errorf("tool-call failed: %s", res.Reason)
	}
}

// losesText is the project's generation stage behind a front that empties every text answer.
type losesText struct{ *generation.Service }

func (s losesText) Generate(ctx context.Context, req *generationv1.GenerateRequest) (*generationv1.GenerateResponse, error) {
	resp, err := s.Service.Generate(ctx, req)
	if err == nil && resp.GetType() == generationv1.ResponseType_RESPONSE_TYPE_MESSAGE {
		resp.Type, resp.Content = generationv1.ResponseType_RESPONSE_TYPE_DONE, ""
	}
	return resp, err
}

func (s losesText) GenerateStream(req *generationv1.GenerateStreamRequest, stream grpc.ServerStreamingServer[generationv1.GenerateStreamResponse]) error {
	resp, err := s.Generate(stream.Context(), req.GetRequest())
	if err != nil {
		return err
	}
	return stream.Send(&generationv1.GenerateStreamResponse{Chunk: &generationv1.GenerateStreamResponse_Final{Final: resp}})
}

// TestPlanningCasesPassAStageThatPlansNothingForAQuestion: a planning stage that answers a
// question with no tool offered with no steps (the model answers it; there is nothing to
// plan) keeps the planning contract, as the orchestrator's check of a replacement's plan
// says: Plan promises a plan that is acyclic, uses only offered tools and has at most
// max_steps steps, none at least. The kit's question-without-tools case failed it ("the plan
// has no steps").
func TestPlanningCasesPassAStageThatPlansNothingForAQuestion(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		planningv1.RegisterPlanningServiceServer(s, plansNothing{planning.New(planning.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "planning", conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range report.Results {
		if !res.Pass && res.Case != "health" {
			t.Errorf("%s: %s", res.Case, res.Reason)
		}
	}
}

// plansNothing is the project's planning stage behind a front that answers a question with no
// tool offered, and nothing proposed or revised, with an empty plan.
type plansNothing struct{ *planning.Service }

func (s plansNothing) Plan(ctx context.Context, req *planningv1.PlanRequest) (*planningv1.PlanResponse, error) {
	if req.GetTaskType() == "question" && len(req.GetAvailableTools()) == 0 && len(req.GetProposedSteps()) == 0 &&
		req.GetRevision() == nil && strings.TrimSpace(req.GetGoal()) != "" {
		return &planningv1.PlanResponse{Source: "rules"}, nil
	}
	return s.Service.Plan(ctx, req)
}

// TestOrchestratorCasesFailAnAPIThatAnswersEmpty: a public API that answers every Run and
// CancelRun with an empty message (no run id, no outcome) fails the kit's cancel-finished-run
// case, saying why: its cancelled=false and outcome UNSPECIFIED matched the empty result, so
// the case passed a stub that keeps no runs.
func TestOrchestratorCasesFailAnAPIThatAnswersEmpty(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		agentv1.RegisterAgentServiceServer(s, answersEmpty{})
	})
	report, err := stagetest.Run(t.Context(), "orchestrator", conn)
	if err != nil {
		t.Fatal(err)
	}
	want := "ended OUTCOME_UNSPECIFIED, want run"
	if res := byCase(report)["cancel-finished-run"]; res.Pass || !strings.Contains(res.Reason, want) {
		t.Errorf("cancel-finished-run: pass=%v %q, want a failure saying %q", res.Pass, res.Reason, want)
	}
}

// answersEmpty is a public API that keeps no runs: Run and CancelRun answer empty messages.
type answersEmpty struct {
	agentv1.UnimplementedAgentServiceServer
}

func (answersEmpty) Run(context.Context, *agentv1.RunRequest) (*typev1.RunResult, error) {
	return &typev1.RunResult{}, nil
}

func (answersEmpty) CancelRun(
	context.Context, *agentv1.CancelRunRequest,
) (*agentv1.CancelRunResponse, error) {
	return &agentv1.CancelRunResponse{}, nil
}

// TestGenerationCasesFailAStageWhoseDeltasDoNotJoinUp: a generation stage that loses every
// second delta of a stream, so that its deltas do not join up to its final answer, fails the
// kit's stream-final-last case, saying so: the orchestrator's llm_delta events are the stage's
// deltas, which the public API promises join up to the attempt's llm_response. It passed the
// case, which checked only the final answer.
func TestGenerationCasesFailAStageWhoseDeltasDoNotJoinUp(t *testing.T) {
	rules := map[string]generation.Provider{"rules": generation.NewRules()}
	svc := generation.New(generation.Options{Providers: rules})
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		generationv1.RegisterGenerationServiceServer(s, dropsDeltas{svc})
	})
	report, err := stagetest.Run(t.Context(), "generation", conn)
	if err != nil {
		t.Fatal(err)
	}
	want := "does not join up to the final answer's content"
	if res := byCase(report)["stream-final-last"]; res.Pass || !strings.Contains(res.Reason, want) {
		t.Errorf("stream-final-last: pass=%v %q, want a failure saying %q", res.Pass, res.Reason, want)
	}
}

// dropsDeltas is the project's generation stage behind a front that sends every second delta
// of a stream only.
type dropsDeltas struct{ *generation.Service }

func (s dropsDeltas) GenerateStream(req *generationv1.GenerateStreamRequest,
	stream grpc.ServerStreamingServer[generationv1.GenerateStreamResponse],
) error {
	return s.Service.GenerateStream(req, &everyOtherDelta{ServerStreamingServer: stream})
}

// everyOtherDelta is a stream that drops the second, fourth, ... delta sent on it.
type everyOtherDelta struct {
	grpc.ServerStreamingServer[generationv1.GenerateStreamResponse]
	deltas int
}

func (s *everyOtherDelta) Send(m *generationv1.GenerateStreamResponse) error {
	if m.GetDelta() != nil {
		s.deltas++
		if s.deltas%2 == 0 {
			return nil
		}
	}
	return s.ServerStreamingServer.Send(m)
}

// TestGenerationCasesFailAStageWithoutUsage: a generation stage that answers without token
// usage (a provider's missing usage passed on as none, where the stage must estimate it) fails
// the kit's answer cases, saying so: the orchestrator counts a run's max_tokens_consumed and
// its context guard's ctx tokens from it, so a run it served would not be held to either. It
// passed them, which checked what an answer says only.
func TestGenerationCasesFailAStageWithoutUsage(t *testing.T) {
	rules := map[string]generation.Provider{"rules": generation.NewRules()}
	svc := generation.New(generation.Options{Providers: rules})
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		generationv1.RegisterGenerationServiceServer(s, noUsage{svc})
	})
	report, err := stagetest.Run(t.Context(), "generation", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	const want = "usage: input 0 and output 0 tokens"
	for _, name := range []string{
		"message-answer", "tool-call", "stream-final-last", "stream-omit-tool-call-deltas",
	} {
		if res := verdicts[name]; res.Pass || !strings.Contains(res.Reason, want) {
			t.Errorf("%s: pass=%v %q, want a failure saying %q", name, res.Pass, res.Reason, want)
		}
	}
	if res := verdicts["embed"]; !res.Pass {
		t.Errorf("embed failed: %s", res.Reason)
	}
}

// noUsage is the project's generation stage behind a front that leaves the token usage out
// of every answer.
type noUsage struct{ *generation.Service }

func (s noUsage) Generate(
	ctx context.Context, req *generationv1.GenerateRequest,
) (*generationv1.GenerateResponse, error) {
	resp, err := s.Service.Generate(ctx, req)
	if err == nil {
		resp.Usage = nil
	}
	return resp, err
}

func (s noUsage) GenerateStream(req *generationv1.GenerateStreamRequest,
	stream grpc.ServerStreamingServer[generationv1.GenerateStreamResponse],
) error {
	return s.Service.GenerateStream(req, usageless{stream})
}

// usageless is a stream whose final answer is sent without its usage.
type usageless struct {
	grpc.ServerStreamingServer[generationv1.GenerateStreamResponse]
}

func (s usageless) Send(m *generationv1.GenerateStreamResponse) error {
	if f := m.GetFinal(); f != nil {
		f.Usage = nil
	}
	return s.ServerStreamingServer.Send(m)
}

// TestMemoryCasesFailAStageThatSavesARunOnce: a memory stage that stores a run's result once
// and refuses a second save of the run (ALREADY_EXISTS, as an insert-only store would) fails
// the kit's save-run-again case, saying why: SaveRun replaces an earlier save of the same run,
// and a replica that adopts a finished run whose save it cannot tell succeeded saves it again,
// until the stage takes it. It passed the table, which saved each run once.
func TestMemoryCasesFailAStageThatSavesARunOnce(t *testing.T) {
	svc := memory.New(memory.Options{})
	t.Cleanup(func() { _ = svc.Close() })
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		memoryv1.RegisterMemoryServiceServer(s, &savesOnce{Service: svc})
	})
	report, err := stagetest.Run(t.Context(), "memory", conn)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := byCase(report)
	const want = "the second save of the run answered AlreadyExists"
	if res := verdicts["save-run-again"]; res.Pass || !strings.Contains(res.Reason, want) {
		t.Errorf("save-run-again: pass=%v %q, want a failure saying %q", res.Pass, res.Reason, want)
	}
	if res := verdicts["save-and-get-run"]; !res.Pass {
		t.Errorf("save-and-get-run failed: %s", res.Reason)
	}
}

// savesOnce is the project's memory stage behind a front that saves each run once.
type savesOnce struct {
	*memory.Service
	saved sync.Map // run id → true
}

func (s *savesOnce) SaveRun(
	ctx context.Context, req *memoryv1.SaveRunRequest,
) (*memoryv1.SaveRunResponse, error) {
	if _, again := s.saved.LoadOrStore(req.GetResult().GetRunId(), true); again {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS,
			"run %q is saved already", req.GetResult().GetRunId())
	}
	return s.Service.SaveRun(ctx, req)
}

// TestIntentCasesFailAStageThatAlwaysAsks: an intent stage that asks for clarification of
// every request, a clear one too, fails the kit's goal-and-task-type case, saying why: the
// orchestrator answers a run whose intent needs clarification with its question, so no run
// it served would ever be answered. It passed the case, whose clear request could be answered
// with a question as long as the goal, task type and tool policy were set.
func TestIntentCasesFailAStageThatAlwaysAsks(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		intentv1.RegisterIntentServiceServer(s, alwaysAsks{intent.New(intent.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "intent", conn)
	if err != nil {
		t.Fatal(err)
	}
	const want = `needs_clarification of a clear request ("What is 6 times 7?")`
	if res := byCase(report)["goal-and-task-type"]; res.Pass || !strings.Contains(res.Reason, want) {
		t.Errorf("goal-and-task-type: pass=%v %q, want a failure saying %q", res.Pass, res.Reason, want)
	}
}

// alwaysAsks is the project's intent stage behind a front that asks what the user means of
// every request it can parse.
type alwaysAsks struct{ *intent.Service }

func (s alwaysAsks) Parse(
	ctx context.Context, req *intentv1.ParseRequest,
) (*intentv1.ParseResponse, error) {
	resp, err := s.Service.Parse(ctx, req)
	if err == nil {
		resp.NeedsClarification, resp.ClarificationQuestion = true, "What do you mean?"
	}
	return resp, err
}

// TestPlanningCasesFailAStageWithoutLimits: a planning stage that takes a request over the
// limits of max_steps, constraints, a step's id, available_tools and a revision's reason (as
// the project's did) fails the kit's limit cases.
func TestPlanningCasesFailAStageWithoutLimits(t *testing.T) {
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		planningv1.RegisterPlanningServiceServer(s, noLimits{planning.New(planning.Options{})})
	})
	report, err := stagetest.Run(t.Context(), "planning", conn)
	if err != nil {
		t.Fatal(err)
	}
	results := byCase(report)
	for _, c := range []string{
		"max-steps-over-limit", "constraints-over-limit", "step-id-over-limit", "tools-over-limit",
		"revision-reason-over-limit",
	} {
		if res, ok := results[c]; !ok || res.Pass || !strings.Contains(res.Reason, "answered OK") {
			t.Errorf("%s: present=%v pass=%v %q, want a failure: the stage answered OK",
				c, ok, res.Pass, res.Reason)
		}
	}
}

// noLimits is the project's planning stage behind a front that brings a request within its
// limits instead of refusing it: max_steps over 1000 is the default, constraints past the
// thousandth, a step's id past its 256th byte, tools past the thousandth and a revision's
// reason past its 65,536th byte are dropped.
type noLimits struct{ *planning.Service }

func (s noLimits) Plan(
	ctx context.Context, req *planningv1.PlanRequest,
) (*planningv1.PlanResponse, error) {
	req = proto.Clone(req).(*planningv1.PlanRequest)
	if req.GetMaxSteps() > 1000 {
		req.MaxSteps = 0
	}
	if len(req.GetConstraints()) > 1000 {
		req.Constraints = req.GetConstraints()[:1000]
	}
	if r := req.GetRevision(); len(r.GetReason()) > 64<<10 {
		r.Reason = r.GetReason()[:64<<10]
	}
	if len(req.GetAvailableTools()) > 1000 {
		req.AvailableTools = req.GetAvailableTools()[:1000]
	}
	for _, st := range req.GetProposedSteps() {
		if len(st.GetId()) > 256 {
			st.Id = st.GetId()[:256]
		}
	}
	return s.Service.Plan(ctx, req)
}

// TestActionCasesFailAStageThatKeysCallsByArguments: an action stage that records its calls
// by (run_id, call_id, arguments), so that a repeated call whose arguments differ runs the
// tool again, fails the kit's repeated-call-cached case; it passed, as its repeated call had
// the first one's arguments, which answer alike whether the tool ran again or not.
func TestActionCasesFailAStageThatKeysCallsByArguments(t *testing.T) {
	svc, err := action.New(action.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conn := grpctest.Serve(t, func(s grpc.ServiceRegistrar) {
		actionv1.RegisterActionServiceServer(s, argumentsInKey{svc})
	})
	report, err := stagetest.Run(t.Context(), "action", conn)
	if err != nil {
		t.Fatal(err)
	}
	if res := byCase(report)["repeated-call-cached"]; res.Pass {
		t.Errorf("repeated-call-cached passed a stage that runs a repeated call again: %s", res.Reason)
	}
	for _, res := range report.Results {
		if !res.Pass && res.Case != "health" && res.Case != "repeated-call-cached" {
			t.Errorf("%s failed: %s", res.Case, res.Reason)
		}
	}
}

// argumentsInKey is the project's action stage behind a front that files a call under its
// call_id and a hash of its arguments.
type argumentsInKey struct{ *action.Service }

func (s argumentsInKey) Execute(
	ctx context.Context, req *actionv1.ExecuteRequest,
) (*actionv1.ExecuteResponse, error) {
	if req.GetCallId() != "" {
		args, err := proto.MarshalOptions{Deterministic: true}.Marshal(req.GetArguments())
		if err != nil {
			return nil, err
		}
		req.CallId = fmt.Sprintf("%s-%x", req.GetCallId(), sha256.Sum256(args))[:len(req.GetCallId())+17]
	}
	return s.Service.Execute(ctx, req)
}

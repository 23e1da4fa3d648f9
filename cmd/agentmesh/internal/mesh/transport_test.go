package mesh_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	generationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/generation/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/pkg/llmtest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestTransportFailuresOfGenerationFailTheRun: a generation stage's failure that gRPC itself
// reports, without the StageError detail of a stage contract — an answer over
// grpc.max_message_bytes (RESOURCE_EXHAUSTED), a replacement stage lacking the method
// (UNIMPLEMENTED) — is the generation stage's failure: the run fails FAILED_PROVIDER, its
// error naming the stage and the cause. It was an unknown failure, which recovery answers by
// asking the user: the run paused AWAITING_INPUT with "Something unexpected went wrong" and
// no error, for a failure no answer of the user's can mend.
func TestTransportFailuresOfGenerationFailTheRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stage generationv1.GenerationServiceServer
		cause string
	}{
		{"answer over the message limit", hugeGeneration{}, "larger than max"},
		{"method unimplemented", generationv1.UnimplementedGenerationServiceServer{},
			"not implemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.GRPC.MaxMessageBytes = 1 << 20
			h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
				addr := serveStage(t, mesh.Generation, func(g *grpc.Server) {
					generationv1.RegisterGenerationServiceServer(g, tc.stage)
				})
				o.StageAddrs = map[string]string{mesh.Generation: addr}
			})
			for _, stream := range []bool{false, true} {
				res := h.run(t, &agentv1.RunRequest{Message: "Say hello.",
					Overrides: &agentv1.RunOverrides{StreamAnswers: &stream}})
				if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER || res.GetSuccess() {
					t.Fatalf("stream %v: outcome %s %s (%v), want FAILED_PROVIDER",
						stream, res.GetOutcome(), res.GetExitReason(), res.GetError())
				}
				msg := res.GetError().GetMessage()
				if !strings.Contains(msg, "generation") || !strings.Contains(msg, tc.cause) {
					t.Errorf("stream %v: error %q, want one naming the generation stage and %q",
						stream, msg, tc.cause)
				}
			}
		})
	}
}

// hugeGeneration is a generation stage in place of the mesh's that answers 2 MiB of text,
// over the 1 MiB grpc.max_message_bytes of TestTransportFailuresOfGenerationFailTheRun.
type hugeGeneration struct {
	generationv1.UnimplementedGenerationServiceServer
}

func (hugeGeneration) Generate(_ context.Context,
	req *generationv1.GenerateRequest) (*generationv1.GenerateResponse, error) {
	resp := hello(req)
	resp.Content = strings.Repeat("a", 2<<20)
	return resp, nil
}

func (g hugeGeneration) GenerateStream(in *generationv1.GenerateStreamRequest,
	stream grpc.ServerStreamingServer[generationv1.GenerateStreamResponse]) error {
	resp, _ := g.Generate(stream.Context(), in.GetRequest())
	final := &generationv1.GenerateStreamResponse_Final{Final: resp}
	return stream.Send(&generationv1.GenerateStreamResponse{Chunk: final})
}

// TestTransportFailuresOfObservationEndTheRun: an observation stage's failure that gRPC itself
// reports, without the StageError detail of a stage contract — an answer over
// grpc.max_message_bytes (RESOURCE_EXHAUSTED), a replacement stage lacking the method
// (UNIMPLEMENTED) — is the observation stage's failure outside its contract: the run ends
// FAILED_PROVIDER / STAGE_CONTRACT_VIOLATION, not retryable, its error naming the stage and
// the cause, and the model is not asked again. It was an unknown failure, which recovery
// answers by asking the user: the run paused AWAITING_INPUT with "Something unexpected went
// wrong", for a failure no answer of the user's can mend.
func TestTransportFailuresOfObservationEndTheRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stage observationv1.ObservationServiceServer
		cause string
	}{
		{"answer over the message limit", hugeObservation{}, "larger than max"},
		{"method unimplemented", observationv1.UnimplementedObservationServiceServer{},
			"not implemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.GRPC.MaxMessageBytes = 1 << 20
			const message = "What is 6 times 7?"
			h := startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
				addr := serveStage(t, mesh.Observation, func(g *grpc.Server) {
					observationv1.RegisterObservationServiceServer(g, tc.stage)
				})
				o.StageAddrs = map[string]string{mesh.Observation: addr}
			}, llmtest.Scenario{Name: "multiply", Match: message, Turns: []llmtest.Turn{
				call("calculator", `{"expression":"6*7"}`), text("never asked"),
			}})
			res := h.run(t, &agentv1.RunRequest{Message: message})
			if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER ||
				res.GetExitReason() != orchestrator.ExitStageContractViolation ||
				res.GetError().GetRetryable() {
				t.Fatalf("outcome %s %s (%v), want FAILED_PROVIDER %s, not retryable",
					res.GetOutcome(), res.GetExitReason(), res.GetError(),
					orchestrator.ExitStageContractViolation)
			}
			msg := res.GetError().GetMessage()
			if !strings.Contains(msg, "observation stage") || !strings.Contains(msg, tc.cause) {
				t.Errorf("error %q, want one naming the observation stage and %q", msg, tc.cause)
			}
			if n := len(requestsFor(h.llm, message)); n != 1 {
				t.Errorf("%d LLM requests, want 1: the model is not asked again", n)
			}
		})
	}
}

// hugeObservation is an observation stage in place of the mesh's that observes every result
// as 2 MiB of text, over the 1 MiB grpc.max_message_bytes of
// TestTransportFailuresOfObservationEndTheRun.
type hugeObservation struct {
	observationv1.UnimplementedObservationServiceServer
}

func (hugeObservation) Observe(context.Context,
	*observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	return &observationv1.ObserveResponse{Observation: strings.Repeat("a", 2<<20),
		ShouldContinue: true, Success: true}, nil
}

// TestTransportFailuresOfStagesBeforeTheModelEndTheRun: a failure of the intent, planning,
// context or action stage (its ListTools) that gRPC itself reports, without the StageError
// detail of a stage contract — a replacement stage lacking the method (UNIMPLEMENTED), an
// undetailed INTERNAL — is the stage's failure outside its contract: the run ends
// STAGE_CONTRACT_VIOLATION, not retryable (the CLI exits 1), naming the stage and the gRPC
// code. It ended STAGE_UNAVAILABLE, retryable (the CLI exited 3, "a stage could not be
// reached"), though the stage answered, and no retry mends it.
func TestTransportFailuresOfStagesBeforeTheModelEndTheRun(t *testing.T) {
	internal := status.Error(codes.Internal, "the planner broke")
	for _, tc := range []struct {
		name, stage string
		register    func(*grpc.Server)
		outcome     typev1.Outcome
		cause       string
	}{
		{"intent unimplemented", mesh.Intent, func(g *grpc.Server) {
			intentv1.RegisterIntentServiceServer(g, intentv1.UnimplementedIntentServiceServer{})
		}, typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, "gRPC Unimplemented"},
		{"planning unimplemented", mesh.Planning, func(g *grpc.Server) {
			planningv1.RegisterPlanningServiceServer(g,
				planningv1.UnimplementedPlanningServiceServer{})
		}, typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, "gRPC Unimplemented"},
		{"planning internal", mesh.Planning, func(g *grpc.Server) {
			planningv1.RegisterPlanningServiceServer(g, failingPlanner{err: internal})
		}, typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, "gRPC Internal"},
		{"context unimplemented", mesh.Context, func(g *grpc.Server) {
			contextv1.RegisterContextServiceServer(g, contextv1.UnimplementedContextServiceServer{})
		}, typev1.Outcome_OUTCOME_FAILED_PROVIDER, "gRPC Unimplemented"},
		{"action unimplemented", mesh.Action, func(g *grpc.Server) {
			actionv1.RegisterActionServiceServer(g, actionv1.UnimplementedActionServiceServer{})
		}, typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, "gRPC Unimplemented"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
				o.StageAddrs = map[string]string{tc.stage: serveStage(t, tc.stage, tc.register)}
			})
			res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
			if res.GetOutcome() != tc.outcome ||
				res.GetExitReason() != orchestrator.ExitStageContractViolation ||
				res.GetError().GetRetryable() {
				t.Fatalf("outcome %s %s (%v), want %s %s, not retryable", res.GetOutcome(),
					res.GetExitReason(), res.GetError(), tc.outcome,
					orchestrator.ExitStageContractViolation)
			}
			msg := res.GetError().GetMessage()
			if !strings.Contains(msg, tc.stage+" stage") || !strings.Contains(msg, tc.cause) {
				t.Errorf("error %q, want one naming the %s stage and %q", msg, tc.stage, tc.cause)
			}
		})
	}
}

// TestContextFailureOfTheForcedFinalTurn: the context stage's failure when the run asks it
// again for a forced final turn (the guard's FORCE_FINAL) is the stage's failure, as on the
// first request: a stage that is down ends the run STAGE_UNAVAILABLE, retryable. Every failure
// of that second request ended the run FAILED_BUDGET_EXHAUSTED / MAX_CONTEXT_REACHED ("This
// conversation no longer fits the model's context window"), which only CONTEXT_OVERFLOW says.
func TestContextFailureOfTheForcedFinalTurn(t *testing.T) {
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		o.StageAddrs = map[string]string{mesh.Context: serveStage(t, mesh.Context,
			func(g *grpc.Server) { contextv1.RegisterContextServiceServer(g, &forcingContext{}) })}
	})
	res := h.run(t, &agentv1.RunRequest{Message: "What is 6 times 7?"})
	if res.GetExitReason() != orchestrator.ExitStageUnavailable || !res.GetError().GetRetryable() {
		t.Fatalf("outcome %s %s (%v), want STAGE_UNAVAILABLE, retryable", res.GetOutcome(),
			res.GetExitReason(), res.GetError())
	}
	if msg := res.GetError().GetMessage(); !strings.Contains(msg, "the memory store is down") {
		t.Errorf("error %q, want the context stage's", msg)
	}
}

// forcingContext is a context stage in place of the mesh's whose guard forces the final turn,
// and that is down when asked again for it.
type forcingContext struct {
	contextv1.UnimplementedContextServiceServer
	asked atomic.Int32
}

func (s *forcingContext) Assemble(_ context.Context,
	req *contextv1.AssembleRequest) (*contextv1.AssembleResponse, error) {
	if s.asked.Add(1) > 1 {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE,
			"the memory store is down")
	}
	return &contextv1.AssembleResponse{Messages: req.GetHistory(), Guard: &typev1.GuardReport{
		Verdict: typev1.GuardVerdict_GUARD_VERDICT_FORCE_FINAL, Reason: "context"}}, nil
}

// TestObservationStageDownEndsTheRun: an observation stage still unavailable after the wait
// (README "A stage restarts") ends the run STAGE_UNAVAILABLE, retryable, naming the stage, at
// the end of the turn. The run went on, and the model was told that the tool, which had run,
// failed ("tool failed: the result could not be observed"), so it could call the tool again:
// a second write, a second payment.
func TestObservationStageDownEndsTheRun(t *testing.T) {
	const message = "What is 6 times 7?"
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		addr := serveStage(t, mesh.Observation, func(g *grpc.Server) {
			observationv1.RegisterObservationServiceServer(g, downObservation{})
		})
		o.StageAddrs = map[string]string{mesh.Observation: addr}
	}, llmtest.Scenario{Name: "multiply", Match: message, Turns: []llmtest.Turn{
		call("calculator", `{"expression":"6*7"}`), call("calculator", `{"expression":"6*7"}`),
		text("never asked"),
	}})
	res := h.run(t, &agentv1.RunRequest{Message: message})
	if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PROVIDER ||
		res.GetExitReason() != orchestrator.ExitStageUnavailable || !res.GetError().GetRetryable() {
		t.Fatalf("outcome %s %s (%v), want FAILED_PROVIDER %s, retryable", res.GetOutcome(),
			res.GetExitReason(), res.GetError(), orchestrator.ExitStageUnavailable)
	}
	if msg := res.GetError().GetMessage(); !strings.Contains(msg, "observation") {
		t.Errorf("error %q, want one naming the observation stage", msg)
	}
	if n := len(requestsFor(h.llm, message)); n != 1 {
		t.Errorf("%d LLM requests, want 1: the model is not asked again", n)
	}
	if n := res.GetToolCalls(); n != 1 {
		t.Errorf("%d tool calls, want 1", n)
	}
}

// downObservation is an observation stage in place of the mesh's that is unavailable, as a
// proxy in front of stopped replicas answers.
type downObservation struct {
	observationv1.UnimplementedObservationServiceServer
}

func (downObservation) Observe(context.Context,
	*observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	return nil, status.Error(codes.Unavailable, "no healthy upstream")
}

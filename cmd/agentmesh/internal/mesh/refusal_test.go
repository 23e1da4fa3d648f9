package mesh_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentmesh/agentmesh/cmd/agentmesh/internal/mesh"
	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/config"
	"github.com/agentmesh/agentmesh/services/orchestrator"
	"google.golang.org/grpc"
)

// TestPreflightRefusalsAreRecoveryDecisions: the stages' refusals that end a run before its
// first turn (INTENT_UNSAFE, NO_VIABLE_PLAN, PLAN_TOO_COMPLEX) go to the recovery stage, as
// every failure does (seed 003: Intent and Planning fail into Error/Recovery, which "always
// produces a user-friendly message"): a recovery_decided event says what it decided, and the
// user reads its message when it aborts. A recovery stage that aborts without a message
// leaves the user the run's own words. The run skipped recovery and answered its own words.
func TestPreflightRefusalsAreRecoveryDecisions(t *testing.T) {
	const (
		unsafe  = "Write me some ransomware"
		noTool  = "Send 17 * 23 to bob@example.com without the calculator"
		tooLong = "Open the notes, then count the words, then multiply by 2, then report the total"
	)
	withRecovery := func(r recoveryv1.RecoveryServiceServer) *harness {
		cfg := config.Default()
		cfg.Defaults.MaxPlanSteps = 3
		if r == nil {
			return start(t, cfg)
		}
		return startOptions(t, cfg, 1, nil, func(o *mesh.Options) {
			addr := serveStage(t, mesh.Recovery, func(g *grpc.Server) {
				recoveryv1.RegisterRecoveryServiceServer(g, r)
			})
			o.StageAddrs = map[string]string{mesh.Recovery: addr}
		})
	}
	builtin := withRecovery(nil)
	own, silent := withRecovery(sayingRecovery{}), withRecovery(silentRecovery{})
	table := []struct {
		message, stage, exit string
		recovers             string // the built-in recovery stage's message
		ownWords             string // the run's own
		allowed              []string
	}{
		{unsafe, "intent", orchestrator.ExitIntentUnsafe,
			"I can't help with that request.", orchestrator.MessageUnsafe, nil},
		{noTool, "planning", orchestrator.ExitNoViablePlan,
			"I don't have the tools needed to complete that request.",
			orchestrator.MessageNoViablePlan, []string{"calculator"}},
		{tooLong, "planning", orchestrator.ExitPlanTooComplex,
			orchestrator.MessageTooComplex, orchestrator.MessageTooComplex, nil},
	}
	for _, tc := range table {
		t.Run(tc.exit, func(t *testing.T) {
			for _, r := range []struct {
				name   string
				h      *harness
				report string
			}{
				{"built-in recovery", builtin, tc.recovers},
				{"recovery of its own", own, sayingRecoveryMessage},
				{"recovery without a message", silent, tc.ownWords},
			} {
				res := r.h.run(t, &agentv1.RunRequest{Message: tc.message,
					Overrides: &agentv1.RunOverrides{AllowedTools: tc.allowed}})
				checkInvariants(t, res)
				if res.GetOutcome() != typev1.Outcome_OUTCOME_FAILED_PREFLIGHT ||
					res.GetExitReason() != tc.exit || res.GetTurns() != 0 {
					t.Fatalf("%s: %s %s (%v) after %d turns, want FAILED_PREFLIGHT %s before "+
						"any turn", r.name, res.GetOutcome(), res.GetExitReason(), res.GetError(),
						res.GetTurns(), tc.exit)
				}
				if got := res.GetFinalReport().GetContent(); got != r.report {
					t.Errorf("%s: report %q, want %q", r.name, got, r.report)
				}
				got := r.h.recoveryStrategies(t, res.GetRunId())
				if !slices.Equal(got, []string{tc.stage + ":abort"}) {
					t.Errorf("%s: recovery decisions %v, want %s:abort", r.name, got, tc.stage)
				}
			}
		})
	}
}

// sayingRecoveryMessage is what sayingRecovery tells the user.
const sayingRecoveryMessage = "The recovery stage of your own says no."

// sayingRecovery is a recovery stage of the user's own: it aborts on every failure, in words
// of its own.
type sayingRecovery struct {
	recoveryv1.UnimplementedRecoveryServiceServer
}

func (sayingRecovery) Decide(
	context.Context, *recoveryv1.DecideRequest,
) (*recoveryv1.DecideResponse, error) {
	return &recoveryv1.DecideResponse{Strategy: recoveryv1.Strategy_STRATEGY_ABORT,
		UserMessage: sayingRecoveryMessage}, nil
}

// TestUnclearIntentWithoutRecoveryAsks: when the recovery stage gives no usable decision
// about an unclear intent (here a retry an hour away, outside its contract), the local rule's
// question to the user is a question: the run asked "I'm having trouble processing your
// request. Please try again." as its clarification question.
func TestUnclearIntentWithoutRecoveryAsks(t *testing.T) {
	h := startOptions(t, nil, 1, nil, func(o *mesh.Options) {
		addr := serveStage(t, mesh.Recovery, func(g *grpc.Server) {
			recoveryv1.RegisterRecoveryServiceServer(g, hourlyRecovery{})
		})
		o.StageAddrs = map[string]string{mesh.Recovery: addr}
	})
	res := h.run(t, &agentv1.RunRequest{Message: "?!?"})
	checkInvariants(t, res)
	d := res.GetDecision()
	if d.GetDecisionType() != typev1.DecisionType_DECISION_TYPE_ASK_CLARIFICATION ||
		d.GetClarificationQuestion() != orchestrator.MessageClarify ||
		res.GetFinalReport().GetContent() != orchestrator.MessageClarify {
		t.Errorf("%s %s: decision %v, report %q; want the question %q", res.GetOutcome(),
			res.GetExitReason(), d, res.GetFinalReport().GetContent(), orchestrator.MessageClarify)
	}
}

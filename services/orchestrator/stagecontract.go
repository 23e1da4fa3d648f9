package orchestrator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	contextv1 "github.com/agentmesh/agentmesh/gen/agentmesh/context/v1"
	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	planningv1 "github.com/agentmesh/agentmesh/gen/agentmesh/planning/v1"
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/plan"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/pkg/toolname"
)

// contractViolation is a stage's answer that breaks the stage's contract. Any stage can be
// replaced (DESIGN §8), so the run checks what it relies on instead of trusting it, and does not
// use such an answer: a plan or an intent outside its contract before the first turn ends the
// run STAGE_CONTRACT_VIOLATION, as do a context without messages and a tool result observed
// as nothing in a turn; a decision outside the recovery contract gives way to the local rule.
type contractViolation struct {
	stage string // "planning", "intent", "context", "observation", "action", "recovery"
	why   string // the rule broken
}

// Error says which stage broke which rule.
func (v *contractViolation) Error() string {
	return "the " + v.stage + " stage answered outside its contract: " + v.why
}

// ending ends a run on the violation, before any turn; retrying cannot help.
func (v *contractViolation) ending() *ending {
	return fail(typev1.Outcome_OUTCOME_FAILED_PREFLIGHT, ExitStageContractViolation, MessageProviderFailure, v.Error())
}

// turnEnding ends a run on the violation in a turn, as a stage's failure there does
// (FAILED_PROVIDER); retrying cannot help.
func (v *contractViolation) turnEnding() *ending {
	return fail(typev1.Outcome_OUTCOME_FAILED_PROVIDER, ExitStageContractViolation,
		MessageProviderFailure, v.Error())
}

// brokenEnding ends a run on its stage's failure outside the stage contract (stageerr.Broken:
// the stage lacks the method, answers over the message size limit, or its answer does not
// decode), as an answer outside the contract does (STAGE_CONTRACT_VIOLATION): FAILED_PREFLIGHT
// before any turn, FAILED_PROVIDER in a turn. Retrying cannot help, nor can an answer of the
// user's, which recovery would ask for a failure it does not know.
func (r *run) brokenEnding(broken *stageerr.Error) *ending {
	outcome := typev1.Outcome_OUTCOME_FAILED_PROVIDER
	if r.turns == 0 {
		outcome = typev1.Outcome_OUTCOME_FAILED_PREFLIGHT
	}
	return fail(outcome, ExitStageContractViolation, MessageProviderFailure, broken.Error())
}

// checkAssembly returns how a context stage's answer breaks the context contract (messages to
// send, always: the newest message of the conversation is kept whatever the budget, else the
// stage fails CONTEXT_OVERFLOW), or nil. Without it the model would be asked nothing, and the
// generation stage's refusal of that would look like the model's failure.
func checkAssembly(resp *contextv1.AssembleResponse) *contractViolation {
	if len(resp.GetMessages()) == 0 {
		return &contractViolation{stage: "context", why: "no messages"}
	}
	return nil
}

// checkObservation returns how an observation stage's answer to req breaks the observation
// contract (text for the model: the result, its summary or its truncation, or "(tool failed:
// <reason>)"; only a blank result that succeeded may be observed as nothing), or nil. The model
// would be told an empty result and answer without the one the tool gave.
func checkObservation(
	req *observationv1.ObserveRequest, obs *observationv1.ObserveResponse,
) *contractViolation {
	status := req.GetStatus()
	failed := status == typev1.ToolStatus_TOOL_STATUS_ERROR ||
		status == typev1.ToolStatus_TOOL_STATUS_TIMEOUT
	if obs.GetObservation() != "" || strings.TrimSpace(req.GetRawResult()) == "" && !failed {
		return nil // a blank result may be observed as it is, or as nothing
	}
	return &contractViolation{stage: "observation", why: fmt.Sprintf(
		"no observation of the result of %s (%d bytes, %s)",
		req.GetToolName(), len(req.GetRawResult()), status)}
}

// checkExecution returns how an action stage's answer to a call breaks the action contract
// (its execution_time_ms and attempts, which the run's accounting takes, are not negative), or
// nil.
func checkExecution(res *actionv1.ExecuteResponse) *contractViolation {
	if res.GetExecutionTimeMs() >= 0 && res.GetAttempts() >= 0 {
		return nil
	}
	return &contractViolation{stage: "action", why: fmt.Sprintf(
		"execution_time_ms %d and attempts %d, which must not be negative",
		res.GetExecutionTimeMs(), res.GetAttempts())}
}

// checkPlan returns how a planning stage's answer to req breaks the planning contract (an
// estimate of turns that is not negative, the rules of pkg/plan, which the planning stage
// applies to the plans it makes, with the tools the request offered and its max_steps, the
// executable order of the steps, and a revision's keeping the steps that are done), or nil.
func checkPlan(req *planningv1.PlanRequest, resp *planningv1.PlanResponse) *contractViolation {
	if n := resp.GetEstimatedSteps(); n < 0 {
		return &contractViolation{stage: stagePlanning,
			why: fmt.Sprintf("estimated_steps %d is negative", n)}
	}
	limit := int(req.GetMaxSteps())
	if limit == 0 {
		limit = plan.DefaultMaxSteps
	}
	err := plan.Check(resp.GetSteps(), plan.Tools(req.GetAvailableTools()), limit)
	if err == nil {
		err = plan.Ordered(resp.GetSteps())
	}
	if err == nil && req.GetRevision() != nil {
		err = plan.KeepsDone(resp.GetSteps(), req.GetRevision().GetSteps())
	}
	if err != nil {
		return &contractViolation{stage: stagePlanning, why: err.Error()}
	}
	return nil
}

// checkTools returns how an action stage's list of tools breaks the action contract (each
// tool has a name of its own, and none is reserved for one of the orchestrator's own tools:
// the model would be offered a nameless tool or two tools of one name, which providers refuse,
// or a call of the name would go to the orchestrator's tool instead of the stage's), or nil.
func checkTools(tools []*typev1.Tool) *contractViolation {
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		name := t.GetName()
		switch {
		case name == "":
			return &contractViolation{stage: "action", why: fmt.Sprintf("tools[%d] has no name", i)}
		case toolname.Reserved(name):
			return &contractViolation{stage: "action", why: fmt.Sprintf("tool %q has a name reserved for one of the orchestrator's own tools (%s)", name, toolname.ReservedNames())}
		case seen[name]:
			return &contractViolation{stage: "action", why: fmt.Sprintf("two tools are named %q", name)}
		}
		seen[name] = true
	}
	return nil
}

// checkIntent returns how an intent stage's answer breaks the intent contract (a goal, always;
// a task type and a tool policy the run knows), or nil.
func checkIntent(resp *intentv1.ParseResponse) *contractViolation {
	why := ""
	switch {
	case strings.TrimSpace(resp.GetGoal()) == "":
		why = "the goal is empty"
	case intentv1.TaskType_name[int32(resp.GetTaskType())] == "":
		why = fmt.Sprintf("task_type %d is not a TaskType", resp.GetTaskType())
	case typev1.ToolPolicy_name[int32(resp.GetToolPolicy())] == "":
		why = fmt.Sprintf("tool_policy %d is not a ToolPolicy", resp.GetToolPolicy())
	default:
		return nil
	}
	return &contractViolation{stage: "intent", why: why}
}

// maxBackoff is the longest wait a recovery decision may ask for (seed 000: never more than
// 60 s).
const maxBackoff = 60 * time.Second

// checkDecision returns how a recovery stage's decision, made in state, breaks the recovery
// contract (one of the four strategies; a backoff between 0 and 60 s; a longer timeout only
// for a tool that is idempotent; a tool call retried only within the max_retries it was told
// of; a tool to use instead that is one of the failed tool's alternatives), or nil. retry
// counts the retries made.
func checkDecision(d *recoveryv1.DecideResponse, retry int, state *recoveryv1.RecoveryState) *contractViolation {
	why := ""
	// A tool call retried with a longer timeout: it timed out.
	longer := d.GetStrategy() == recoveryv1.Strategy_STRATEGY_RETRY && d.GetModifiedAction().GetTimeoutMs() > 0 && state.GetToolName() != ""
	switch s, alt := d.GetStrategy(), d.GetModifiedAction().GetToolName(); {
	case s == recoveryv1.Strategy_STRATEGY_UNSPECIFIED || recoveryv1.Strategy_name[int32(s)] == "":
		why = fmt.Sprintf("strategy %d is not retry, fallback, abort or ask_user", s)
	case d.GetBackoffMs() < 0 || d.GetBackoffMs() > maxBackoff.Milliseconds():
		why = fmt.Sprintf("backoff_ms %d is not between 0 and %d", d.GetBackoffMs(), maxBackoff.Milliseconds())
	case longer && !state.GetIdempotent():
		// A timed-out call may have had its effect: only an idempotent tool runs again.
		why = fmt.Sprintf("a retry of %s, which is not idempotent", state.GetToolName())
	case s == recoveryv1.Strategy_STRATEGY_RETRY && state.GetToolName() != "" && state.GetMaxRetries() > 0 && retry >= int(state.GetMaxRetries()):
		// Else a tool that always times out, or an action stage that cannot take the call, is
		// called again until the run's time is up.
		why = fmt.Sprintf("retry %d of %s is past max_retries %d", retry, state.GetToolName(), state.GetMaxRetries())
	case alt != "" && !slices.Contains(state.GetAlternativeTools(), alt):
		// The run would execute a tool it did not offer, or may not use, with another's arguments.
		why = fmt.Sprintf("tool %q is not one of the alternatives %v", alt, state.GetAlternativeTools())
	default:
		return nil
	}
	return &contractViolation{stage: "recovery", why: why}
}

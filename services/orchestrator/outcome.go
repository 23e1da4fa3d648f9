package orchestrator

import (
	"context"
	"errors"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// Exit reasons (DESIGN §6, the RAG contract's list extended).
const (
	ExitCompleted          = "COMPLETED"
	ExitApprovalRequired   = "APPROVAL_REQUIRED"
	ExitEmptyInput         = "EMPTY_INPUT"
	ExitIntentUnsafe       = "INTENT_UNSAFE"
	ExitNoViablePlan       = "NO_VIABLE_PLAN"
	ExitPlanTooComplex     = "PLAN_TOO_COMPLEX"
	ExitInvalidContract    = "INVALID_CONTRACT"
	ExitToolRequired       = "TOOL_REQUIRED"
	ExitInvalidToolCall    = "INVALID_TOOL_CALL"
	ExitGenerationFailure  = "LLM_GENERATION_FAILURE"
	ExitFinalReportInvalid = "FINAL_REPORT_INVALID"
	ExitMaxTurns           = "MAX_TURNS_REACHED"
	ExitMaxToolCalls       = "MAX_TOOL_CALLS_REACHED"
	ExitMaxContext         = "MAX_CONTEXT_REACHED"
	ExitMaxTokens          = "MAX_TOKENS_REACHED"
	// ExitMaxTokensExceeded is an answer cut off at the output token limit before it had
	// any content (the generation stage's MAX_TOKENS_EXCEEDED).
	ExitMaxTokensExceeded   = "MAX_TOKENS_EXCEEDED"
	ExitTimeout             = "TIMEOUT"
	ExitToolPolicyViolation = "TOOL_POLICY_VIOLATION"
	ExitCycleForbidden      = "CYCLE_FORBIDDEN"
	ExitAuthError           = "AUTH_ERROR"
	ExitQuotaExceeded       = "QUOTA_EXCEEDED"
	ExitRateLimited         = "RATE_LIMITED"
	ExitLLMError            = "LLM_ERROR"
	ExitStageUnavailable    = "STAGE_UNAVAILABLE"
	ExitUserRejected        = "USER_REJECTED"
	ExitApprovalTimeout     = "APPROVAL_TIMEOUT"
	ExitCancelled           = "CANCELLED"
)

// Exit reasons of a run that asks its user a question, of a malformed tool result, and of a
// stage that answered outside its contract.
const (
	// ExitInputRequired is a run paused for its user's answer (OUTCOME_AWAITING_INPUT).
	ExitInputRequired = "INPUT_REQUIRED"
	// ExitAnswerTimeout is a run whose user did not answer its question in time.
	ExitAnswerTimeout = "ANSWER_TIMEOUT"
	// ExitToolResultInvalid is a tool result that breaks the output schema its tool declares
	// (seed 001: a malformed tool result envelope is FAILED_VALIDATION).
	ExitToolResultInvalid = "TOOL_RESULT_INVALID"
	// ExitStageContractViolation is a stage's answer outside its stage contract, which the run
	// does not use: a plan that is cyclic, uses a tool that was not offered, has more than
	// max_steps steps, repeats a step id, depends on an unknown step or is out of order; an
	// intent without a goal or with an unknown task type or tool policy; an action stage's list
	// of tools with a nameless tool, two tools of one name or one named like the orchestrator's
	// own (toolname.Reserved); a stage call gRPC itself fails, without the stage's error
	// detail, in a way no retry mends (stageerr.Broken). A replacement stage
	// that answers so fails `agentmesh conformance`; retrying the run cannot help.
	ExitStageContractViolation = "STAGE_CONTRACT_VIOLATION"
	// ExitCheckpointUnreadable is a run whose stored checkpoint cannot be read back or
	// restored (it, its body or its log does not decode, or the log does not hold what it
	// counts): the replica that adopts it ends it OUTCOME_FAILED_VALIDATION, as nothing can
	// resume it.
	ExitCheckpointUnreadable = "CHECKPOINT_UNREADABLE"
)

// Canned user-facing messages of seed 004, shown verbatim.
const (
	MessageProviderFailure = "I'm having trouble processing your request. Please try again."
	MessageRateLimited     = "I'm receiving too many requests. Please wait a moment."
	MessageTooComplex      = "That request is too complex. Could you break it into smaller steps?"
	// MessageAnswerTooLong is the message of MAX_TOKENS_EXCEEDED, the recovery stage's.
	MessageAnswerTooLong = "My answer would be too long. Could you narrow the request down?"
)

// Canned user-facing messages of the endings that are failures of policy (issue 11.3: every
// ending but EMPTY_INPUT tells the user what happened), shown verbatim.
const (
	// MessageToolRequired ends a run that needed a tool and answered without executing one.
	MessageToolRequired = "I couldn't complete this request: it needs a tool, and I answered without using one. Please try again."
	// MessageToolPolicyViolation ends a run whose model called a tool although tools are
	// forbidden for it.
	MessageToolPolicyViolation = "I stopped because I tried to use a tool, and tools are not allowed for this request."
	// MessageCycleForbidden ends a run whose model called tools in a sequence its contract
	// forbids.
	MessageCycleForbidden = "I stopped because I tried to use tools in an order that this request does not allow."
	// MessageClarify is the question asked when a request needs clarification and no
	// question came with it.
	MessageClarify = "Could you tell me more about what you would like me to do?"
	// MessageHowToProceed is the question asked when the recovery stage decides to ask the
	// user how to proceed after a failure in a turn, and no question came with its decision.
	MessageHowToProceed = "Something went wrong. How would you like me to proceed?"
	// MessageUnsafe ends a run whose request the intent stage refused as unsafe
	// (INTENT_UNSAFE), when the recovery stage's decision gives no words of its own.
	MessageUnsafe = "I can't help with that request."
	// MessageNoViablePlan ends a run whose goal no plan reaches with the tools it may use
	// (NO_VIABLE_PLAN), when the recovery stage's decision gives no words of its own.
	MessageNoViablePlan = "I don't have the tools needed to complete that request."
)

// messageAnswerTimeout is the final report of a run whose user did not answer its question in
// time (ANSWER_TIMEOUT).
const messageAnswerTimeout = "Nobody answered my question in time, so I stopped."

// messageRejected is the final report of a run that ends because a person rejected a call
// (USER_REJECTED); %s is the tool's name.
const messageRejected = "The call to %s was rejected, so it was not carried out and the run stopped."

// CutOffNotice is the ephemeral retry message after an answer (text or final report) cut
// off at the output token limit (seed 000: truncation is incomplete, retry). Like
// EmptyResponseNotice it is sent with the retry only and never stored in the conversation.
const CutOffNotice = "System notice: your last answer was cut off because it reached the output token limit. " +
	"Give your answer again, shorter, so that all of it fits."

// EmptyResponseNotice is seed 000's ephemeral retry message for an answer with no content, no
// tool calls and no reasoning. It is sent once and never stored in the conversation.
const EmptyResponseNotice = "System notice: plain text responses without tool calls are ignored. Use final_report to provide your answer."

// ContentFilteredNotice is the ephemeral retry message after an answer the provider's content
// filter withheld or stopped (stop reason content_filter, with nothing or part of it
// delivered): it is retried as an empty answer is (seed 000), with a notice that says what
// happened instead of EmptyResponseNotice.
const ContentFilteredNotice = "System notice: your last answer was withheld by the provider's content filter, so nobody saw it. " +
	"Answer again within the provider's content policy, or say briefly that you cannot help with this request."

// errShutdown is the cancellation cause when the orchestrator stops.
var errShutdown = errors.New("orchestrator shutting down")

// errCancelled is the cancellation cause of CancelRun.
var errCancelled = errors.New("run cancelled by its caller")

// Causes that stop a run on this replica without ending it: it continues on another one.
var (
	errHandOff   = errors.New("orchestrator replica shutting down: the run is handed off")
	errLeaseLost = errors.New("the run was lost: another replica took it over")
)

// ending is how a run terminates.
type ending struct {
	outcome typev1.Outcome
	exit    string
	// message is the user-facing text of a system-made final report.
	message string
	// reason goes into final_report.metadata.reason and the error.
	reason string
	// retryable says whether running the request again may help.
	retryable bool
	// answer is the model's final message: every successful ending has one, and so does
	// MAX_TOOL_CALLS_REACHED when the final turn answered (toolBudgetEnding).
	answer *typev1.Message
	// report is the accepted final report, when the answer came through final_report or
	// needed decoding (json output).
	report *report
	// truncated says the answer was cut off at the output token limit in every attempt of
	// its turn and accepted as it was: its report is PARTIAL.
	truncated bool
	// stop ends the run's work on this replica without terminating it: it was handed off or
	// its lease was lost, and another replica continues from its last checkpoint.
	stop bool
	// resume, on a stop ending, is the run's work from a pause on, to continue on another
	// goroutine of this replica (yield).
	resume func(context.Context) *ending
}

// stopHere is the ending of a run that continues on another replica.
func stopHere(why string) *ending { return &ending{stop: true, reason: why} }

func (e ending) success() bool {
	return e.outcome == typev1.Outcome_OUTCOME_COMPLETED_WITH_TOOLS || e.outcome == typev1.Outcome_OUTCOME_COMPLETED_CHAT_ONLY
}

func fail(outcome typev1.Outcome, exit, message, reason string) *ending {
	return &ending{outcome: outcome, exit: exit, message: message, reason: reason}
}

// providerEnding is the ending of a failed LLM attempt the loop does not retry (see
// providerExit).
func providerEnding(se *stageerr.Error) *ending {
	outcome, exit, message := providerExit(se)
	e := fail(outcome, exit, message, se.Error())
	e.retryable = se.Retryable()
	return e
}

// providerExit maps a generation failure to its outcome, exit reason and canned message: an
// answer cut off before it had any content is MAX_TOKENS_EXCEEDED (the output token limit is
// a budget, and the same request hits it again); a request the provider refused as longer
// than its context window is MAX_CONTEXT_REACHED, as a conversation the context stage could
// not fit; every other failure is FAILED_PROVIDER, by error class. se may be nil (no failure
// known).
func providerExit(se *stageerr.Error) (outcome typev1.Outcome, exit, message string) {
	if se == nil {
		return typev1.Outcome_OUTCOME_FAILED_PROVIDER, ExitLLMError, MessageProviderFailure
	}
	if se.Code == typev1.StageErrorCode_STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED {
		return typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxTokensExceeded, MessageAnswerTooLong
	}
	if se.Class == typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW {
		return typev1.Outcome_OUTCOME_FAILED_BUDGET_EXHAUSTED, ExitMaxContext, messageContextFull
	}
	outcome = typev1.Outcome_OUTCOME_FAILED_PROVIDER
	switch se.Class {
	case typev1.ErrorClass_ERROR_CLASS_AUTH:
		return outcome, ExitAuthError, MessageProviderFailure
	case typev1.ErrorClass_ERROR_CLASS_QUOTA:
		return outcome, ExitQuotaExceeded, MessageProviderFailure
	case typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED:
		return outcome, ExitRateLimited, MessageRateLimited
	}
	return outcome, ExitLLMError, MessageProviderFailure
}

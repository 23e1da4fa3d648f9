package recovery

import (
	recoveryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/recovery/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// change is how the proposed action differs from the failed one.
type change int

const (
	// sameAction proposes no change: the failure is reported and the run goes on.
	sameAction change = iota
	// nextTarget moves the LLM call to the next target, round-robin.
	nextTarget
	// longerTimeout doubles the tool timeout, up to Options.MaxToolTimeout; a timeout already
	// past that cap is kept, never shortened.
	longerTimeout
	// alternativeTool calls one of the failed tool's alternatives with the same arguments.
	alternativeTool
)

// wait is how long to wait before acting.
type wait int

const (
	// noWait acts immediately.
	noWait wait = iota
	// rateLimitWait waits only when every target was rate-limited in the current round-robin
	// cycle (ai-agent §3), then for the largest Retry-After of the cycle, else 1 s ·
	// 2^retry_count, up to 60 s; otherwise the next target is tried at once.
	rateLimitWait
	// jitteredWait backs off 500 ms · 2^retry_count ± 20 %, up to 60 s.
	jitteredWait
)

// rule is how one kind of failure is handled.
type rule struct {
	strategy recoveryv1.Strategy
	change   change
	wait     wait
	// message is the user_message.
	message string
	// gaveUp is the user_message when the retry budget turns a retry or fallback into an
	// abort; empty means msgGaveUp.
	gaveUp string
	// reason explains the strategy.
	reason string
}

const (
	retry    = recoveryv1.Strategy_STRATEGY_RETRY
	fallback = recoveryv1.Strategy_STRATEGY_FALLBACK
	abort    = recoveryv1.Strategy_STRATEGY_ABORT
	askUser  = recoveryv1.Strategy_STRATEGY_ASK_USER
)

// generationRules handle GENERATION_FAILED by error class (ai-agent §3). A class missing here
// is handled like ERROR_CLASS_UNSPECIFIED.
var generationRules = map[typev1.ErrorClass]rule{
	typev1.ErrorClass_ERROR_CLASS_AUTH:             {abort, sameAction, noWait, msgLLMFailure, "", "authentication failures are fatal and never retried"},
	typev1.ErrorClass_ERROR_CLASS_QUOTA:            {abort, sameAction, noWait, msgLLMFailure, "", "quota failures are fatal and never retried"},
	typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED:     {retry, nextTarget, rateLimitWait, msgRateLimited, msgRateLimited, "rate limited: retry on the next target, waiting only once every target is rate-limited"},
	typev1.ErrorClass_ERROR_CLASS_TIMEOUT:          {fallback, nextTarget, noWait, msgLLMFailure, msgLLMFailure, "fall back to the next target immediately, without backoff"},
	typev1.ErrorClass_ERROR_CLASS_NETWORK:          {fallback, nextTarget, noWait, msgLLMFailure, msgLLMFailure, "fall back to the next target immediately, without backoff"},
	typev1.ErrorClass_ERROR_CLASS_SERVER:           {fallback, nextTarget, noWait, msgLLMFailure, msgLLMFailure, "fall back to the next target immediately, without backoff"},
	typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE:     {fallback, nextTarget, noWait, msgLLMFailure, msgLLMFailure, "fall back to the next target immediately, without backoff"},
	typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED:      {fallback, nextTarget, noWait, msgLLMFailure, msgLLMFailure, "fall back to the next target immediately, without backoff"},
	typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST:  {fallback, nextTarget, noWait, msgLLMFailure, msgLLMFailure, "the target refused the request: fall back to a target that has not, which builds a request of its own"},
	typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW: {fallback, nextTarget, noWait, msgContextOverflow, msgContextOverflow, "the request is longer than the target's context window: fall back to a target that has not refused it, whose window may be larger"},
}

// codeRules handle every other failure code. A code missing here is unknown: ask the user.
var codeRules = map[typev1.StageErrorCode]rule{
	typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT:     {retry, longerTimeout, jitteredWait, msgToolTimeout, "", "the tool is idempotent: retry with a longer timeout"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR:       {fallback, alternativeTool, noWait, msgToolFailed, "", "try an alternative tool"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS:     {fallback, sameAction, noWait, msgToolCallFixed, "", "the model is told and may correct its arguments"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND:        {fallback, sameAction, noWait, msgToolMissing, "", "the model is told the tool does not exist and may choose another"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_TOOL_CALL:     {fallback, sameAction, noWait, msgToolCallFixed, "", "the model is told and may correct its tool call"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_USER_REJECTED:         {fallback, sameAction, noWait, msgUserRejected, "", "the model is told the action was rejected and continues without it"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_APPROVAL_TIMEOUT:      {fallback, sameAction, noWait, msgApprovalTimeout, "", "the model is told the action was not approved in time and continues without it"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_UNAVAILABLE:    {fallback, sameAction, noWait, msgNoMemory, "", "continue without memory"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR:         {fallback, sameAction, noWait, msgNoMemory, "", "continue without memory"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR:        {askUser, sameAction, noWait, msgUnclear, "", "the intent is unclear: ask the user"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE:         {abort, sameAction, noWait, msgUnsafe, "", "unsafe requests are refused"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN:        {abort, sameAction, noWait, msgNoPlan, "", "no plan reaches the goal with the available tools"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX:      {abort, sameAction, noWait, msgTooComplex, "", "the plan exceeds the step limit"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW:      {abort, sameAction, noWait, msgContextOverflow, "", "the minimum context does not fit the window"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL:           {abort, sameAction, noWait, msgMemoryFull, "", "the user's memory quota is exceeded"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED:   {abort, sameAction, noWait, msgMaxTokens, "", "the response exceeds the token limit"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED:     {abort, sameAction, noWait, msgPermission, "", "the action is not permitted"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT:         {abort, sameAction, noWait, msgInvalidInput, "", "the request is malformed; retrying cannot help"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE:           {retry, sameAction, jitteredWait, msgBusy, "", "a replica is draining or its store is down: retry after a backoff"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS:        {abort, sameAction, noWait, msgInvalidInput, "", "the named object exists already; retrying cannot help"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED:       {abort, sameAction, noWait, msgPermission, "", "the call's credentials are missing or wrong; retrying cannot help"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_RESOURCE_EXHAUSTED:    {abort, sameAction, noWait, msgInvalidInput, "", "the call outgrew what the service holds for it; retrying it as it is cannot help"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR:           {abort, sameAction, noWait, msgToolResultBad, "", "the tool's result is malformed (not the JSON its output schema declares); retrying cannot help"},
	typev1.StageErrorCode_STAGE_ERROR_CODE_OBSERVATION_TOO_LARGE: {askUser, sameAction, noWait, msgTooMuchOutput, "", "the result is too large to observe, so it cannot be summarised adequately: ask the user for guidance"},
}

// timeoutNotIdempotent handles EXECUTION_TIMEOUT of a tool that is not idempotent: it may
// have had its effect, so it is not run again, and the model is told it timed out.
var timeoutNotIdempotent = rule{fallback, sameAction, noWait, msgToolTimedOut, "",
	"the tool is not idempotent, so running it again could repeat its effect: the model is told it timed out"}

// unknownRule handles failures the table does not know ("Unknown → ask user for guidance").
var unknownRule = rule{askUser, sameAction, noWait, msgUnknown, "", "unknown failure: ask the user for guidance"}

// lookup returns the rule for a failure of a run in state. A timed-out tool is retried only
// when it is idempotent.
func lookup(e *typev1.StageError, state *recoveryv1.RecoveryState) rule {
	if e.GetCode() == typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT && !state.GetIdempotent() {
		return timeoutNotIdempotent
	}
	if e.GetCode() == typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED {
		if r, ok := generationRules[e.GetErrorClass()]; ok {
			return r
		}
		return generationRules[typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED]
	}
	if r, ok := codeRules[e.GetCode()]; ok {
		return r
	}
	return unknownRule
}

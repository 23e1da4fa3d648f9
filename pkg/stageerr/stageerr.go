package stageerr

import (
	"errors"
	"fmt"
	"strings"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// Error is a failure of a stage contract.
type Error struct {
	// Code is the stage contract's failure code.
	Code typev1.StageErrorCode
	// Class classifies generation failures.
	Class typev1.ErrorClass
	// RetryAfter is how long to wait before retrying, when known.
	RetryAfter time.Duration
	// Stage is the stage that failed.
	Stage string
	// Msg says what went wrong.
	Msg string
	// Cause is the underlying error, if any.
	Cause error
	// Accounting are the paid requests the stage made before it failed (a stage that asked
	// its model, then refused), so the run accounts them; they travel as status details.
	Accounting []*typev1.AccountingEntry
	// Reason names the failure for a client that acts on it, with Metadata the values it
	// acts on (e.g. where to resume): they travel as an ErrorInfo status detail of Domain, so
	// that no client reads them out of the message. Empty for none.
	Reason string
	// Metadata are the values of Reason, by name.
	Metadata map[string]string
}

// Error returns the message, or the code's name when there is no message. Bytes of the
// message that are not UTF-8 (a provider's or a tool's binary answer quoted in it) are each
// run replaced by U+FFFD: the message travels in protobuf strings (the status's StageError
// detail, a run's accounting and events, its checkpoints), which must be UTF-8.
func (e *Error) Error() string {
	if e.Msg == "" {
		return CodeName(e.Code)
	}
	return strings.ToValidUTF8(e.Msg, "\uFFFD")
}

// Unwrap returns the cause (none of a nil *Error).
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Cause
}

// Is reports whether target is an *Error with the same code (and the same class when the
// target names one), so errors.Is(err, ErrToolNotFound) works on any error of that code. A nil
// *Error (FromError of nil) is no error of any code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || e == nil {
		return false
	}
	return t.Code == e.Code && (t.Class == typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED || t.Class == e.Class)
}

// AccountAnswer fills entry, a caller's accounting of its failed Generate call, with what the
// answer cost when the failure carries the answer's accounting: the generation stage's
// MAX_TOKENS_EXCEEDED (an answer cut off before any content), and its failure of an answer that
// broke off after part of it arrived, come after the provider answered and charged for it. It
// sets the tokens, stop reason, actual model and cost, and returns the
// tokens, nil when the failure carries none (nothing was answered, or a stage other than the
// project's failed) or e is nil.
func (e *Error) AccountAnswer(entry *typev1.AccountingEntry) *typev1.TokenUsage {
	if e == nil || len(e.Accounting) != 1 {
		return nil
	}
	spent := e.Accounting[0]
	entry.Tokens, entry.StopReason = spent.GetTokens(), spent.GetStopReason()
	entry.ActualModel, entry.CostUsd = spent.GetActualModel(), spent.GetCostUsd()
	return entry.Tokens
}

// Retryable reports whether the same request may succeed when retried.
func (e *Error) Retryable() bool {
	if e.Code == typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED {
		return classRetryable[e.Class]
	}
	return mapping[e.Code].retryable
}

// TargetRefused reports whether e is a generation failure of a request its target refuses
// itself (TargetRefuses).
func (e *Error) TargetRefused() bool {
	return e != nil && e.Code == typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED &&
		TargetRefuses(e.Class)
}

// TargetRefuses reports whether a generation failure of class is a request its target
// refuses itself, INVALID_REQUEST or CONTEXT_OVERFLOW: the same request to the same target is
// refused again, so the target is not asked again in the turn, while another target, which
// builds a request of its own (another model, another window), may take it.
func TargetRefuses(class typev1.ErrorClass) bool {
	return class == typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST ||
		class == typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW
}

// Errorf returns an *Error with the given code and a formatted message. A %w verb wraps its
// operand as the cause.
func Errorf(code typev1.StageErrorCode, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Code: code, Msg: err.Error(), Cause: errors.Unwrap(err)}
}

// Invalid returns an INVALID_INPUT error saying what is wrong with a request.
func Invalid(format string, args ...any) *Error {
	return Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, format, args...)
}

// Generation returns a GENERATION_FAILED error of the given class.
func Generation(class typev1.ErrorClass, retryAfter time.Duration, format string, args ...any) *Error {
	e := Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED, format, args...)
	e.Class = class
	e.RetryAfter = retryAfter
	return e
}

// CodeName returns the contract name of a code, e.g. "TOOL_NOT_FOUND".
func CodeName(code typev1.StageErrorCode) string {
	return strings.TrimPrefix(code.String(), "STAGE_ERROR_CODE_")
}

// ClassName returns the contract name of an error class, e.g. "RATE_LIMITED".
func ClassName(class typev1.ErrorClass) string {
	return strings.TrimPrefix(class.String(), "ERROR_CLASS_")
}

// As returns the *Error in err's chain, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

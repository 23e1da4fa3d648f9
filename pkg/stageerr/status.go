package stageerr

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

type rule struct {
	code      codes.Code
	retryable bool
}

// mapping is the table from stage failure codes to canonical gRPC codes.
var mapping = map[typev1.StageErrorCode]rule{
	typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED:           {codes.Internal, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT:         {codes.InvalidArgument, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR:        {codes.InvalidArgument, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE:         {codes.PermissionDenied, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN:        {codes.FailedPrecondition, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX:      {codes.ResourceExhausted, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW:      {codes.ResourceExhausted, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_UNAVAILABLE:    {codes.Unavailable, true},
	typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED:     {codes.Unavailable, true},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_TOOL_CALL:     {codes.InvalidArgument, true},
	typev1.StageErrorCode_STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED:   {codes.ResourceExhausted, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND:        {codes.NotFound, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS:     {codes.InvalidArgument, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT:     {codes.DeadlineExceeded, true},
	typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR:       {codes.FailedPrecondition, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED:     {codes.PermissionDenied, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR:           {codes.InvalidArgument, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_OBSERVATION_TOO_LARGE: {codes.ResourceExhausted, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL:           {codes.ResourceExhausted, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR:         {codes.Unavailable, true},
	typev1.StageErrorCode_STAGE_ERROR_CODE_APPROVAL_TIMEOUT:      {codes.DeadlineExceeded, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_USER_REJECTED:         {codes.PermissionDenied, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND:             {codes.NotFound, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION:   {codes.FailedPrecondition, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS:        {codes.AlreadyExists, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE:           {codes.Unavailable, true},
	typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED:       {codes.Unauthenticated, false},
	typev1.StageErrorCode_STAGE_ERROR_CODE_RESOURCE_EXHAUSTED:    {codes.ResourceExhausted, false},
}

// classCodes refines GENERATION_FAILED by error class.
var classCodes = map[typev1.ErrorClass]codes.Code{
	typev1.ErrorClass_ERROR_CLASS_AUTH:            codes.PermissionDenied,
	typev1.ErrorClass_ERROR_CLASS_QUOTA:           codes.ResourceExhausted,
	typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED:    codes.ResourceExhausted,
	typev1.ErrorClass_ERROR_CLASS_TIMEOUT:         codes.DeadlineExceeded,
	typev1.ErrorClass_ERROR_CLASS_NETWORK:         codes.Unavailable,
	typev1.ErrorClass_ERROR_CLASS_SERVER:          codes.Unavailable,
	typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE:    codes.Unavailable,
	typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST: codes.InvalidArgument,
	// As CONTEXT_OVERFLOW, the context stage's failure of a conversation past the window.
	typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW: codes.ResourceExhausted,
}

// classRetryable says which generation failures may succeed when retried (ai-agent §3: auth
// and quota are fatal; a request the provider refused as invalid is refused again).
var classRetryable = map[typev1.ErrorClass]bool{
	typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED:  true,
	typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED: true,
	typev1.ErrorClass_ERROR_CLASS_TIMEOUT:      true,
	typev1.ErrorClass_ERROR_CLASS_NETWORK:      true,
	typev1.ErrorClass_ERROR_CLASS_SERVER:       true,
	typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE: true,
}

// GRPCCode returns the canonical gRPC code of a stage failure.
func GRPCCode(code typev1.StageErrorCode, class typev1.ErrorClass) codes.Code {
	if code == typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED {
		if c, ok := classCodes[class]; ok {
			return c
		}
	}
	if r, ok := mapping[code]; ok {
		return r.code
	}
	return codes.Internal
}

// Domain is the domain of the ErrorInfo details of ToStatus.
const Domain = "agentmesh"

// ToStatus converts any error into a gRPC status error carrying a StageError detail, an
// AccountingEntry detail for each of an *Error's Accounting and an ErrorInfo detail of its
// Reason, if any. Errors that already are statuses pass through; context cancellation and
// deadlines map to CANCELED and DEADLINE_EXCEEDED; anything else unclassified is INTERNAL.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if e := As(err); e != nil {
		st := status.New(GRPCCode(e.Code, e.Class), e.Error())
		details := []protoadapt.MessageV1{protoadapt.MessageV1Of(Detail(e))}
		for _, a := range e.Accounting {
			details = append(details, protoadapt.MessageV1Of(a))
		}
		if e.Reason != "" {
			info := &errdetails.ErrorInfo{Reason: e.Reason, Domain: Domain, Metadata: e.Metadata}
			details = append(details, protoadapt.MessageV1Of(info))
		}
		withDetail, derr := st.WithDetails(details...)
		if derr != nil {
			return st.Err()
		}
		return withDetail.Err()
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// Detail returns the StageError detail of e.
func Detail(e *Error) *typev1.StageError {
	return &typev1.StageError{
		Code:         e.Code,
		Retryable:    e.Retryable(),
		RetryAfterMs: e.RetryAfter.Milliseconds(),
		ErrorClass:   e.Class,
		Stage:        e.Stage,
		Message:      e.Error(),
	}
}

// FromError recovers a stage error from an error returned by a gRPC call, with the
// AccountingEntry details as its Accounting and the ErrorInfo detail of Domain as its Reason
// and Metadata. A status without a StageError detail becomes an
// *Error whose code is derived from the gRPC code; nil stays nil.
func FromError(err error) *Error {
	if err == nil {
		return nil
	}
	if e := As(err); e != nil {
		return e
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{Msg: err.Error(), Cause: err}
	}
	e := &Error{Code: codeFromGRPC(st.Code()), Class: classFromGRPC(st.Code()), Msg: st.Message(), Cause: err}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *typev1.StageError:
			e.Code, e.Class, e.Stage = d.GetCode(), d.GetErrorClass(), d.GetStage()
			e.RetryAfter = time.Duration(d.GetRetryAfterMs()) * time.Millisecond
		case *typev1.AccountingEntry:
			e.Accounting = append(e.Accounting, d)
		case *errdetails.ErrorInfo:
			if d.GetDomain() == Domain {
				e.Reason, e.Metadata = d.GetReason(), d.GetMetadata()
			}
		}
	}
	return e
}

// FromStage is FromError for the failure of a call to stage, whose contract names its own
// failures code (of class, for GENERATION_FAILED): a status without a StageError detail whose
// gRPC code no contract code stands for — one gRPC itself gives, such as RESOURCE_EXHAUSTED for
// an answer over the message size limit, INTERNAL from a codec, UNIMPLEMENTED from a
// replacement stage lacking the method — is that stage's failure of code (of class, unless the
// gRPC code gives one), its message naming the stage and the gRPC code. FromError leaves it
// unclassified, a failure the recovery stage does not know, which it answers by asking the
// user; no answer of the user's mends a stage that cannot deliver its answer. nil stays nil.
func FromStage(err error, stage string, code typev1.StageErrorCode,
	class typev1.ErrorClass) *Error {
	e := FromError(err)
	st := undetailed(err)
	if e == nil || st == nil || e.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED {
		return e
	}
	e.Code, e.Class, e.Stage = code, cmp.Or(e.Class, class), stage
	e.Msg = outsideContract(stage, st)
	return e
}

// Broken returns the failure of a call to stage when gRPC itself gave it, without a StageError
// detail, with a code that says the stage cannot serve the call however often it is asked:
// UNIMPLEMENTED (a replacement stage lacking the method), RESOURCE_EXHAUSTED (an answer over
// the message size limit), INTERNAL (a codec's), UNKNOWN, DATA_LOSS or OUT_OF_RANGE. It is of
// no contract code, its message names the stage and the gRPC code, and it is not retryable. A
// stage that is down or slow (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED), a call cancelled, a
// failure of a code a contract code stands for (FromError) and one of the stage's contract are
// not broken: nil.
func Broken(err error, stage string) *Error {
	st := undetailed(err)
	if st == nil || !brokenCodes[st.Code()] {
		return nil
	}
	return &Error{Stage: stage, Msg: outsideContract(stage, st), Cause: err}
}

// brokenCodes are the gRPC codes of Broken.
var brokenCodes = map[codes.Code]bool{
	codes.Unimplemented: true, codes.ResourceExhausted: true, codes.Internal: true,
	codes.Unknown: true, codes.DataLoss: true, codes.OutOfRange: true,
}

// undetailed is err's status when gRPC gave it without a stage contract's StageError detail
// (and err is no *Error of this process); nil otherwise.
func undetailed(err error) *status.Status {
	if err == nil || As(err) != nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if _, detailed := d.(*typev1.StageError); detailed {
			return nil
		}
	}
	return st
}

// outsideContract is the message of stage's failure st outside its contract.
func outsideContract(stage string, st *status.Status) string {
	return fmt.Sprintf("the %s stage failed outside its contract (gRPC %s): %s",
		stage, st.Code(), st.Message())
}

func codeFromGRPC(c codes.Code) typev1.StageErrorCode {
	switch c {
	case codes.InvalidArgument:
		return typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT
	case codes.NotFound:
		return typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND
	case codes.FailedPrecondition:
		return typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION
	case codes.PermissionDenied:
		return typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED
	case codes.Unauthenticated:
		return typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED
	case codes.AlreadyExists:
		return typev1.StageErrorCode_STAGE_ERROR_CODE_ALREADY_EXISTS
	case codes.Unavailable:
		return typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE
	}
	return typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED
}

func classFromGRPC(c codes.Code) typev1.ErrorClass {
	switch c {
	case codes.Unavailable:
		return typev1.ErrorClass_ERROR_CLASS_NETWORK
	case codes.DeadlineExceeded:
		return typev1.ErrorClass_ERROR_CLASS_TIMEOUT
	}
	return typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED
}

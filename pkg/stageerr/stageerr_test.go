package stageerr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestMapping pins the gRPC code and retryability of every stage failure code.
func TestMapping(t *testing.T) {
	type want struct {
		code      codes.Code
		retryable bool
	}
	table := map[typev1.StageErrorCode]want{
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
	if len(table) != len(typev1.StageErrorCode_name) {
		t.Fatalf("table covers %d codes, the proto has %d: pin every code", len(table), len(typev1.StageErrorCode_name))
	}
	for code, w := range table {
		t.Run(stageerr.CodeName(code), func(t *testing.T) {
			err := stageerr.ToStatus(stageerr.Errorf(code, "something about %s", "x"))
			st, _ := status.FromError(err)
			if st.Code() != w.code {
				t.Errorf("grpc code = %v, want %v", st.Code(), w.code)
			}
			if st.Message() != "something about x" {
				t.Errorf("message = %q", st.Message())
			}
			back := stageerr.FromError(err)
			if back.Code != code || back.Retryable() != w.retryable {
				t.Errorf("round trip = %v retryable %v, want %v retryable %v", back.Code, back.Retryable(), code, w.retryable)
			}
		})
	}
}

// TestGenerationClasses pins the gRPC code and retryability of every generation error class.
func TestGenerationClasses(t *testing.T) {
	table := []struct {
		class     typev1.ErrorClass
		code      codes.Code
		retryable bool
	}{
		{typev1.ErrorClass_ERROR_CLASS_UNSPECIFIED, codes.Unavailable, true},
		{typev1.ErrorClass_ERROR_CLASS_AUTH, codes.PermissionDenied, false},
		{typev1.ErrorClass_ERROR_CLASS_QUOTA, codes.ResourceExhausted, false},
		{typev1.ErrorClass_ERROR_CLASS_RATE_LIMITED, codes.ResourceExhausted, true},
		{typev1.ErrorClass_ERROR_CLASS_TIMEOUT, codes.DeadlineExceeded, true},
		{typev1.ErrorClass_ERROR_CLASS_NETWORK, codes.Unavailable, true},
		{typev1.ErrorClass_ERROR_CLASS_SERVER, codes.Unavailable, true},
		{typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, codes.Unavailable, true},
		{typev1.ErrorClass_ERROR_CLASS_INVALID_REQUEST, codes.InvalidArgument, false},
		{typev1.ErrorClass_ERROR_CLASS_CONTEXT_OVERFLOW, codes.ResourceExhausted, false},
	}
	if len(table) != len(typev1.ErrorClass_name) {
		t.Fatalf("table covers %d classes, the proto has %d", len(table), len(typev1.ErrorClass_name))
	}
	for _, tc := range table {
		t.Run(stageerr.ClassName(tc.class), func(t *testing.T) {
			err := stageerr.ToStatus(stageerr.Generation(tc.class, 1500*time.Millisecond, "provider said no"))
			if got := status.Code(err); got != tc.code {
				t.Errorf("grpc code = %v, want %v", got, tc.code)
			}
			back := stageerr.FromError(err)
			if back.Class != tc.class || back.Retryable() != tc.retryable || back.RetryAfter != 1500*time.Millisecond {
				t.Errorf("round trip = class %v retryable %v after %v", back.Class, back.Retryable(), back.RetryAfter)
			}
			if !errors.Is(back, stageerr.ErrGenerationFailed) {
				t.Error("errors.Is(GENERATION_FAILED) = false")
			}
		})
	}
}

func TestWrappingAndPlainErrors(t *testing.T) {
	wrapped := fmt.Errorf("executing: %w", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND, "no tool %q", "nope"))
	if !errors.Is(wrapped, stageerr.ErrToolNotFound) {
		t.Fatal("wrapped error does not match its sentinel")
	}
	if errors.Is(wrapped, stageerr.ErrInvalidArguments) {
		t.Fatal("wrapped error matches another code's sentinel")
	}
	if got := status.Code(stageerr.ToStatus(wrapped)); got != codes.NotFound {
		t.Errorf("wrapped: code %v", got)
	}
	if got := status.Code(stageerr.ToStatus(errors.New("boom"))); got != codes.Internal {
		t.Errorf("plain: code %v", got)
	}
	if got := status.Code(stageerr.ToStatus(context.Canceled)); got != codes.Canceled {
		t.Errorf("canceled: code %v", got)
	}
	if got := status.Code(stageerr.ToStatus(fmt.Errorf("x: %w", context.DeadlineExceeded))); got != codes.DeadlineExceeded {
		t.Errorf("deadline: code %v", got)
	}
	passthrough := status.Error(codes.Aborted, "already a status")
	if got := stageerr.ToStatus(passthrough); got != passthrough {
		t.Errorf("status not passed through: %v", got)
	}
	if stageerr.ToStatus(nil) != nil || stageerr.FromError(nil) != nil {
		t.Error("nil must stay nil")
	}
	plain := stageerr.FromError(status.Error(codes.Unavailable, "connection refused"))
	if plain.Class != typev1.ErrorClass_ERROR_CLASS_NETWORK || plain.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE || !plain.Retryable() {
		t.Errorf("a bare UNAVAILABLE should read as a retryable network failure (UNAVAILABLE), got %v %v", plain.Code, plain.Class)
	}
}

// TestAccountingTravels checks that the paid requests a stage made before it failed reach the
// caller with the error.
func TestAccountingTravels(t *testing.T) {
	e := stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE, "request violates the safety policy: %s", "malware")
	e.Accounting = []*typev1.AccountingEntry{{Type: typev1.AccountingType_ACCOUNTING_TYPE_LLM, Provider: "p", Model: "m", Attempts: 1}}
	back := stageerr.FromError(stageerr.ToStatus(e))
	if back.Code != e.Code || back.Msg != e.Msg || len(back.Accounting) != 1 || back.Accounting[0].GetModel() != "m" {
		t.Errorf("round trip = %v with accounting %v", back, back.Accounting)
	}
	if plain := stageerr.FromError(stageerr.ToStatus(stageerr.Invalid("x"))); plain.Accounting != nil {
		t.Errorf("an error without accounting came back with %v", plain.Accounting)
	}
}

// TestReasonTravels: an error's Reason and Metadata reach the caller as an ErrorInfo detail,
// which a client reads instead of the message; an error without a Reason carries none.
func TestReasonTravels(t *testing.T) {
	e := stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, "gone")
	e.Reason, e.Metadata = "SOMETHING_GONE", map[string]string{"from_seq": "7"}
	err := stageerr.ToStatus(e)
	var info *errdetails.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		if d, ok := d.(*errdetails.ErrorInfo); ok {
			info = d
		}
	}
	if info.GetReason() != "SOMETHING_GONE" || info.GetDomain() != stageerr.Domain ||
		info.GetMetadata()["from_seq"] != "7" || status.Convert(err).Message() != "gone" {
		t.Errorf("status %v with ErrorInfo %v; want message gone, reason SOMETHING_GONE of "+
			"domain %s and from_seq 7", status.Convert(err), info, stageerr.Domain)
	}
	back := stageerr.FromError(err)
	if back.Reason != "SOMETHING_GONE" || back.Metadata["from_seq"] != "7" {
		t.Errorf("round trip = reason %q, metadata %v", back.Reason, back.Metadata)
	}
	plain := stageerr.ToStatus(stageerr.Invalid("x"))
	for _, d := range status.Convert(plain).Details() {
		if _, ok := d.(*errdetails.ErrorInfo); ok {
			t.Errorf("an error without a reason came with ErrorInfo %v", d)
		}
	}
}

// TestAMessageThatIsNotUTF8 (a provider's binary answer quoted in it) travels with its bad
// bytes replaced by U+FFFD, and its StageError detail with it: a detail that is not UTF-8
// cannot be encoded, and was dropped.
func TestAMessageThatIsNotUTF8(t *testing.T) {
	e := stageerr.Generation(typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE, 0, "not JSON: %s", "x\x8b\xff y")
	const want = "not JSON: x\uFFFD y"
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	got := stageerr.FromError(stageerr.ToStatus(e))
	if got.Error() != want || got.Class != typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE {
		t.Errorf("through a status: %q of class %s, want %q of class BAD_RESPONSE", got.Error(), got.Class, want)
	}
}

// TestFromErrorOfNilIsNoError: FromError(nil) is a nil *Error, which errors.Is compares with
// a code without panicking (it dereferenced its receiver).
func TestFromErrorOfNilIsNoError(t *testing.T) {
	if errors.Is(stageerr.FromError(nil), stageerr.ErrToolNotFound) {
		t.Error("FromError(nil) is ErrToolNotFound")
	}
}

// TestFromStage: a status without a StageError detail of a gRPC code no contract code stands
// for is the called stage's failure of its own code, naming the stage and the gRPC code; a
// detailed status, one FromError classifies and nil keep FromError's reading.
func TestFromStage(t *testing.T) {
	gen := typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED
	bad := typev1.ErrorClass_ERROR_CLASS_BAD_RESPONSE
	of := func(err error) *stageerr.Error { return stageerr.FromStage(err, "generation", gen, bad) }
	for _, c := range []codes.Code{
		codes.ResourceExhausted, codes.Internal, codes.Unimplemented, codes.Unknown,
	} {
		got := of(status.Error(c, "grpc said so"))
		want := fmt.Sprintf("the generation stage failed outside its contract (gRPC %s): "+
			"grpc said so", c)
		if got.Code != gen || got.Class != bad || got.Stage != "generation" || got.Error() != want {
			t.Errorf("%s: %s (%s) of stage %q: %q", c, got.Code, got.Class, got.Stage, got.Error())
		}
	}
	if got := of(status.Error(codes.DeadlineExceeded, "slow")); got.Class != typev1.ErrorClass_ERROR_CLASS_TIMEOUT {
		t.Errorf("DEADLINE_EXCEEDED: class %s, want TIMEOUT", got.Class)
	}
	unspecified := typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED
	detailed := stageerr.ToStatus(stageerr.Errorf(unspecified, "said so"))
	if got := of(detailed); got.Code != unspecified || got.Error() != "said so" {
		t.Errorf("detailed: %s %q", got.Code, got.Error())
	}
	if got := of(status.Error(codes.Unavailable, "down")); got.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_UNAVAILABLE {
		t.Errorf("UNAVAILABLE: %s", got.Code)
	}
	if of(nil) != nil {
		t.Error("nil must stay nil")
	}
}

// TestBroken: a status without a StageError detail of a gRPC code that says the stage cannot
// serve the call is the stage's failure outside its contract, not retryable, naming the stage
// and the gRPC code; a stage down or slow, a detailed status, a code a contract code stands
// for, an error of this process and nil are not.
func TestBroken(t *testing.T) {
	for _, c := range []codes.Code{
		codes.Unimplemented, codes.ResourceExhausted, codes.Internal, codes.Unknown,
		codes.DataLoss, codes.OutOfRange,
	} {
		got := stageerr.Broken(status.Error(c, "grpc said so"), "intent")
		want := fmt.Sprintf("the intent stage failed outside its contract (gRPC %s): %s", c,
			"grpc said so")
		if got == nil || got.Stage != "intent" || got.Retryable() || got.Error() != want {
			t.Errorf("%s: %v, want %q, not retryable", c, got, want)
		}
	}
	unspecified := typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED
	for name, err := range map[string]error{
		"UNAVAILABLE":       status.Error(codes.Unavailable, "down"),
		"DEADLINE_EXCEEDED": status.Error(codes.DeadlineExceeded, "slow"),
		"ABORTED":           status.Error(codes.Aborted, "conflict"),
		"CANCELED":          status.Error(codes.Canceled, "cancelled"),
		"INVALID_ARGUMENT":  status.Error(codes.InvalidArgument, "bad"),
		"detailed":          stageerr.ToStatus(stageerr.Errorf(unspecified, "said so")),
		"of this process":   stageerr.Errorf(unspecified, "said so"),
		"not a status":      errors.New("plain"),
		"nil":               nil,
	} {
		if got := stageerr.Broken(err, "intent"); got != nil {
			t.Errorf("%s: broken %q", name, got)
		}
	}
}

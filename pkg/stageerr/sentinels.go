package stageerr

import typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"

// Sentinel errors, one per failure code of the stage contracts. Compare with errors.Is; wrap
// with Errorf (or fmt.Errorf("%w: ...")) to add a message.
var (
	ErrInvalidInput        = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT}
	ErrIntentUnclear       = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR}
	ErrIntentUnsafe        = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE}
	ErrNoViablePlan        = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN}
	ErrPlanTooComplex      = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX}
	ErrContextOverflow     = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_CONTEXT_OVERFLOW}
	ErrMemoryUnavailable   = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_UNAVAILABLE}
	ErrGenerationFailed    = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_GENERATION_FAILED}
	ErrInvalidToolCall     = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_TOOL_CALL}
	ErrMaxTokensExceeded   = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED}
	ErrToolNotFound        = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND}
	ErrInvalidArguments    = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS}
	ErrExecutionTimeout    = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT}
	ErrExecutionError      = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR}
	ErrPermissionDenied    = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED}
	ErrParseError          = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR}
	ErrObservationTooLarge = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_OBSERVATION_TOO_LARGE}
	ErrMemoryFull          = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_MEMORY_FULL}
	ErrStorageError        = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_STORAGE_ERROR}
	ErrApprovalTimeout     = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_APPROVAL_TIMEOUT}
	ErrUserRejected        = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_USER_REJECTED}
	ErrNotFound            = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND}
	ErrFailedPrecondition  = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION}
	ErrUnauthenticated     = &Error{Code: typev1.StageErrorCode_STAGE_ERROR_CODE_UNAUTHENTICATED}
)

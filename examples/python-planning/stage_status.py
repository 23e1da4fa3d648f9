"""Stage errors as agentmesh sends them: a gRPC status with a StageError detail.

Every error an agentmesh stage returns carries, besides its gRPC code and message, a
google.rpc.Status in the binary trailer grpc-status-details-bin, whose details hold an
agentmesh.type.v1.StageError packed in a google.protobuf.Any (pkg/stageerr in the Go code). The
orchestrator reads the StageError to decide what a failure means for the run, so a replacement
stage must send it the same way.

The grpcio-status package (grpc_status.rpc_status) builds that trailer, but Debian's
python3-grpcio does not include it and PyPI may be out of reach, so this module encodes the
trailer by hand: a serialised google.rpc.Status whose code and message repeat the call's, with
the StageError as its only detail. (The client example, ../python-client, reads it back.)
"""

import collections

import grpc

from agentmesh.type.v1 import stage_error_pb2
from google.rpc import status_pb2

# TRAILER is the binary trailer that carries the rich status (a "-bin" key: gRPC base64s it).
TRAILER = "grpc-status-details-bin"

Code = stage_error_pb2.StageErrorCode

# RULES maps each stage failure code to its gRPC code and whether retrying may help, as
# pkg/stageerr's table does.
RULES = {
    Code.STAGE_ERROR_CODE_UNSPECIFIED: (grpc.StatusCode.INTERNAL, False),
    Code.STAGE_ERROR_CODE_INVALID_INPUT: (grpc.StatusCode.INVALID_ARGUMENT, False),
    Code.STAGE_ERROR_CODE_INTENT_UNCLEAR: (grpc.StatusCode.INVALID_ARGUMENT, False),
    Code.STAGE_ERROR_CODE_INTENT_UNSAFE: (grpc.StatusCode.PERMISSION_DENIED, False),
    Code.STAGE_ERROR_CODE_NO_VIABLE_PLAN: (grpc.StatusCode.FAILED_PRECONDITION, False),
    Code.STAGE_ERROR_CODE_PLAN_TOO_COMPLEX: (grpc.StatusCode.RESOURCE_EXHAUSTED, False),
    Code.STAGE_ERROR_CODE_CONTEXT_OVERFLOW: (grpc.StatusCode.RESOURCE_EXHAUSTED, False),
    Code.STAGE_ERROR_CODE_MEMORY_UNAVAILABLE: (grpc.StatusCode.UNAVAILABLE, True),
    Code.STAGE_ERROR_CODE_GENERATION_FAILED: (grpc.StatusCode.UNAVAILABLE, True),
    Code.STAGE_ERROR_CODE_INVALID_TOOL_CALL: (grpc.StatusCode.INVALID_ARGUMENT, True),
    Code.STAGE_ERROR_CODE_MAX_TOKENS_EXCEEDED: (grpc.StatusCode.RESOURCE_EXHAUSTED, False),
    Code.STAGE_ERROR_CODE_TOOL_NOT_FOUND: (grpc.StatusCode.NOT_FOUND, False),
    Code.STAGE_ERROR_CODE_INVALID_ARGUMENTS: (grpc.StatusCode.INVALID_ARGUMENT, False),
    Code.STAGE_ERROR_CODE_EXECUTION_TIMEOUT: (grpc.StatusCode.DEADLINE_EXCEEDED, True),
    Code.STAGE_ERROR_CODE_EXECUTION_ERROR: (grpc.StatusCode.FAILED_PRECONDITION, False),
    Code.STAGE_ERROR_CODE_PERMISSION_DENIED: (grpc.StatusCode.PERMISSION_DENIED, False),
    Code.STAGE_ERROR_CODE_PARSE_ERROR: (grpc.StatusCode.INVALID_ARGUMENT, False),
    Code.STAGE_ERROR_CODE_OBSERVATION_TOO_LARGE: (grpc.StatusCode.RESOURCE_EXHAUSTED, False),
    Code.STAGE_ERROR_CODE_MEMORY_FULL: (grpc.StatusCode.RESOURCE_EXHAUSTED, False),
    Code.STAGE_ERROR_CODE_STORAGE_ERROR: (grpc.StatusCode.UNAVAILABLE, True),
    Code.STAGE_ERROR_CODE_APPROVAL_TIMEOUT: (grpc.StatusCode.DEADLINE_EXCEEDED, False),
    Code.STAGE_ERROR_CODE_USER_REJECTED: (grpc.StatusCode.PERMISSION_DENIED, False),
    Code.STAGE_ERROR_CODE_NOT_FOUND: (grpc.StatusCode.NOT_FOUND, False),
    Code.STAGE_ERROR_CODE_FAILED_PRECONDITION: (grpc.StatusCode.FAILED_PRECONDITION, False),
    Code.STAGE_ERROR_CODE_ALREADY_EXISTS: (grpc.StatusCode.ALREADY_EXISTS, False),
    Code.STAGE_ERROR_CODE_UNAVAILABLE: (grpc.StatusCode.UNAVAILABLE, True),
    Code.STAGE_ERROR_CODE_UNAUTHENTICATED: (grpc.StatusCode.UNAUTHENTICATED, False),
    Code.STAGE_ERROR_CODE_RESOURCE_EXHAUSTED: (grpc.StatusCode.RESOURCE_EXHAUSTED, False),
}


class StageError(Exception):
    """A failure of a stage contract: a StageErrorCode and a message saying what went wrong."""

    def __init__(self, code, message, stage=""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.stage = stage

    def grpc_code(self):
        """The gRPC status code the failure is sent with."""
        return RULES.get(self.code, RULES[Code.STAGE_ERROR_CODE_UNSPECIFIED])[0]

    def detail(self):
        """The StageError detail of the failure."""
        return stage_error_pb2.StageError(
            code=self.code,
            retryable=RULES.get(self.code, (None, False))[1],
            stage=self.stage,
            message=self.message,
        )


class _Status(collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status):
    """A grpc.Status for ServicerContext.abort_with_status."""


def to_status(err):
    """Returns the grpc.Status of a StageError: its code and message, and the rich status trailer."""
    code = err.grpc_code()
    rich = status_pb2.Status(code=code.value[0], message=err.message)
    rich.details.add().Pack(err.detail())
    return _Status(code, err.message, ((TRAILER, rich.SerializeToString()),))


def abort(context, err):
    """Ends the RPC of context with the StageError err; it raises, so it never returns."""
    context.abort_with_status(to_status(err))


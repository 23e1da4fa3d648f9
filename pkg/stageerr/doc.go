// Package stageerr is the one place where domain errors of the stage contracts become gRPC
// statuses and back.
//
// Domain code returns (or wraps) an *Error, usually through Errorf or one of the sentinel
// values such as ErrToolNotFound. The server interceptors of pkg/server call ToStatus on every
// error a handler returns, so a handler never builds a status itself. Clients call FromError to
// recover the StageError detail (code, retryability, retry-after, error class).
package stageerr

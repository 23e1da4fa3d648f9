package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

// meshFailure is the cause of the context untilFailed returns once a service failed.
type meshFailure struct{ err error }

// Error returns the failure's message.
func (f *meshFailure) Error() string { return f.err.Error() }

// untilFailed returns a context that ends with ctx or once failed (mesh.Mesh.Failed) yields
// an error, and failure, which returns that error (nil while none came, or when ctx ended
// first). stop releases the goroutine that waits for failed.
func untilFailed(ctx context.Context, failed <-chan error) (_ context.Context, failure func() error, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case err, ok := <-failed:
			if ok && err != nil {
				cancel(&meshFailure{err: err})
			}
		case <-ctx.Done():
		}
	}()
	failure = func() error {
		if f := (*meshFailure)(nil); errors.As(context.Cause(ctx), &f) {
			return f.err
		}
		return nil
	}
	return ctx, failure, func() { cancel(nil); <-done }
}

// failed logs the failure of a service of the mesh, err (nil: none), and returns the error dev
// exits with once the mesh is stopped: err's exit code, exitcode.Unavailable unless it carries
// one, as a service binary exits (server.Main), the message already logged.
func failed(log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	log.Error("a service of the mesh failed: stopping the mesh", "err", err)
	return exitcode.Wrap(exitcode.Of(exitcode.Default(exitcode.Unavailable, err)), errReported)
}

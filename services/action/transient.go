package action

import (
	"errors"
	"time"
)

// transientError marks a backend's failure as worth retrying (it wraps ErrTransient, ErrNotSent
// when unsent and ErrMayHaveRun when mayHaveRun) while keeping the backend's message as the
// one the model sees.
type transientError struct {
	err        error
	unsent     bool          // nothing reached the backend
	mayHaveRun bool          // the backend may have run the call
	after      time.Duration // the backend asked to be tried again no sooner (Retry-After)
}

// Error returns the backend's message.
func (e transientError) Error() string { return e.err.Error() }

// Unwrap returns ErrTransient, ErrNotSent when unsent, ErrMayHaveRun when mayHaveRun, and the
// backend's error.
func (e transientError) Unwrap() []error {
	switch {
	case e.unsent:
		return []error{ErrTransient, ErrNotSent, e.err}
	case e.mayHaveRun:
		return []error{ErrTransient, ErrMayHaveRun, e.err}
	}
	return []error{ErrTransient, e.err}
}

// notSentError is a failure before anything reached the tool's backend that trying again
// cannot mend: it wraps ErrNotSent, not ErrTransient, keeping the failure's message.
type notSentError struct{ error }

// Unwrap returns ErrNotSent and the failure.
func (e notSentError) Unwrap() []error { return []error{ErrNotSent, e.error} }

// retryAfter is how long err's backend asked to wait before the call is tried again; 0 when it
// did not say.
func retryAfter(err error) time.Duration {
	var te transientError
	if errors.As(err, &te) {
		return te.after
	}
	return 0
}

package action

// transientError marks a backend's failure as worth retrying (it wraps ErrTransient, and
// ErrNotSent when unsent) while keeping the backend's message as the one the model sees.
type transientError struct {
	err    error
	unsent bool // nothing reached the backend
}

// Error returns the backend's message.
func (e transientError) Error() string { return e.err.Error() }

// Unwrap returns ErrTransient, ErrNotSent when unsent, and the backend's error.
func (e transientError) Unwrap() []error {
	if e.unsent {
		return []error{ErrTransient, ErrNotSent, e.err}
	}
	return []error{ErrTransient, e.err}
}

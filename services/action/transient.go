package action

// transientError marks a backend's failure as worth retrying (it wraps ErrTransient) while
// keeping the backend's message as the one the model sees.
type transientError struct{ err error }

// Error returns the backend's message.
func (e transientError) Error() string { return e.err.Error() }

// Unwrap returns ErrTransient and the backend's error.
func (e transientError) Unwrap() []error { return []error{ErrTransient, e.err} }

// Package exitcode holds the process exit codes of the agentmesh binaries and carries them
// through errors, so that the function that knows why a command failed decides how it exits.
package exitcode

import (
	"errors"
	"fmt"
)

// Exit codes of the agentmesh CLI and service binaries.
const (
	// OK means success.
	OK = 0
	// Failed means the run failed or an internal error happened.
	Failed = 1
	// Unavailable means a service or MCP server could not start or be reached.
	Unavailable = 3
	// Invalid means invalid arguments or configuration.
	Invalid = 4
	// Schema means a schema validation failure.
	Schema = 5
)

// Error is an error that carries the exit code the process should end with.
type Error struct {
	// Code is the exit code.
	Code int
	// Err is the failure.
	Err error
}

// Error returns the message of the wrapped error.
func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit code %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// Wrap returns err annotated with an exit code, or nil when err is nil.
func Wrap(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Default returns err annotated with code unless its chain carries an exit code already (a
// cause that knows better, such as a tool schema that does not compile inside a configuration
// error), or nil when err is nil.
func Default(code int, err error) error {
	var e *Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	return &Error{Code: code, Err: err}
}

// Of returns the exit code for err: OK for nil, the code of the outermost *Error in its
// chain, else Failed.
func Of(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Failed
}

package exitcode_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentmesh/agentmesh/pkg/exitcode"
)

func TestOf(t *testing.T) {
	boom := errors.New("boom")
	table := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, exitcode.OK},
		{"plain error", boom, exitcode.Failed},
		{"unavailable", exitcode.Wrap(exitcode.Unavailable, boom), exitcode.Unavailable},
		{"invalid", exitcode.Wrap(exitcode.Invalid, boom), exitcode.Invalid},
		{"schema", exitcode.Wrap(exitcode.Schema, boom), exitcode.Schema},
		{"wrapped by fmt", fmt.Errorf("loading config: %w", exitcode.Wrap(exitcode.Invalid, boom)), exitcode.Invalid},
		{"outermost code wins", exitcode.Wrap(exitcode.Schema, exitcode.Wrap(exitcode.Invalid, boom)), exitcode.Schema},
		{"explicit zero", exitcode.Wrap(exitcode.OK, boom), exitcode.OK},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitcode.Of(tc.err); got != tc.want {
				t.Errorf("Of(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	if exitcode.Wrap(exitcode.Invalid, nil) != nil {
		t.Fatal("Wrap(code, nil) must be nil")
	}
	boom := errors.New("boom")
	err := exitcode.Wrap(exitcode.Unavailable, boom)
	if err.Error() != "boom" {
		t.Errorf("message = %q, want the wrapped message", err.Error())
	}
	if !errors.Is(err, boom) {
		t.Error("errors.Is does not reach the wrapped error")
	}
	var e *exitcode.Error
	if !errors.As(err, &e) || e.Code != exitcode.Unavailable {
		t.Errorf("errors.As found %+v, want code %d", e, exitcode.Unavailable)
	}
	if got := (&exitcode.Error{Code: exitcode.Schema}).Error(); got != "exit code 5" {
		t.Errorf("message without an error = %q", got)
	}
}

func TestDefault(t *testing.T) {
	if exitcode.Default(exitcode.Invalid, nil) != nil {
		t.Fatal("Default(code, nil) must be nil")
	}
	boom := errors.New("boom")
	if got := exitcode.Of(exitcode.Default(exitcode.Invalid, boom)); got != exitcode.Invalid {
		t.Errorf("an error without a code got %d, want %d", got, exitcode.Invalid)
	}
	inner := fmt.Errorf("tool x: %w", exitcode.Wrap(exitcode.Schema, boom))
	err := exitcode.Default(exitcode.Invalid, inner)
	if got := exitcode.Of(err); got != exitcode.Schema || !errors.Is(err, boom) {
		t.Errorf("an error with a code got %d (%v), want its own %d", got, err, exitcode.Schema)
	}
}

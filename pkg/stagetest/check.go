package stagetest

import (
	"errors"
	"fmt"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// wantOK returns how err breaks a case whose request must succeed.
func wantOK(err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	return fmt.Errorf("answered %s (%q), want success", st.Code(), st.Message())
}

// wantFailure returns how err differs from the failure the contract requires: gRPC code c
// with a StageError detail of code sc, whose message names each of names.
func wantFailure(err error, c codes.Code, sc typev1.StageErrorCode, names ...string) error {
	want := fmt.Sprintf("%s with StageError %s", c, stageerr.CodeName(sc))
	if err == nil {
		return errors.New("answered OK, want " + want)
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("answered %v, want %s", err, want)
	}
	detail := stageErrorOf(err)
	var problems []string
	if st.Code() != c {
		problems = append(problems, fmt.Sprintf("gRPC code %s, want %s", st.Code(), c))
	}
	switch {
	case detail == nil:
		problems = append(problems, "no StageError detail, want one of code "+stageerr.CodeName(sc))
	case detail.GetCode() != sc:
		problems = append(problems, fmt.Sprintf("StageError %s, want %s", stageerr.CodeName(detail.GetCode()), stageerr.CodeName(sc)))
	}
	for _, n := range names {
		if !strings.Contains(st.Message(), n) {
			problems = append(problems, fmt.Sprintf("the message does not name %q", n))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s (message %q)", strings.Join(problems, "; "), st.Message())
	}
	return nil
}

// wantInvalid is wantFailure for invalid input: INVALID_ARGUMENT with StageError
// INVALID_INPUT, naming the field that is wrong.
func wantInvalid(err error, field string) error {
	return wantFailure(err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, field)
}

// problems collects how an answer breaks a case.
type problems []string

// addf records a problem.
func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// err returns the problems as one error, or nil.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return errors.New(strings.Join(p, "; "))
}

// stageErrorOf returns the StageError detail of a gRPC error, or nil.
func stageErrorOf(err error) *typev1.StageError {
	for _, d := range status.Convert(err).Details() {
		if se, ok := d.(*typev1.StageError); ok {
			return se
		}
	}
	return nil
}

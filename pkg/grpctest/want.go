package grpctest

import (
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// WantStageError fails the test unless err is a gRPC error with grpcCode whose StageError
// detail has code and whose message contains every one of parts. It returns the stage error.
func WantStageError(t testing.TB, err error, grpcCode codes.Code, code typev1.StageErrorCode, parts ...string) *stageerr.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %v error, got success", grpcCode)
	}
	if got := status.Code(err); got != grpcCode {
		t.Fatalf("grpc code = %v, want %v (%v)", got, grpcCode, err)
	}
	se := stageerr.FromError(err)
	if se.Code != code {
		t.Fatalf("stage code = %v, want %v (%v)", se.Code, code, err)
	}
	for _, p := range parts {
		if !strings.Contains(se.Error(), p) {
			t.Errorf("message %q does not contain %q", se.Error(), p)
		}
	}
	return se
}

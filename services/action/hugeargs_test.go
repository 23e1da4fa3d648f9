package action_test

import (
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"google.golang.org/grpc/codes"
)

// TestAHugeArgumentThatFailsItsSchemaIsRefusedNamingIt: the refusal of arguments that do not
// match the tool's schema quoted every offending value whole, and named every failure: a
// 3 MiB string of control bytes that did not match a pattern, or 200,000 items of the wrong
// type, made a status of tens of megabytes, more than the client takes in its trailers, and
// the client's connection failed as UNAVAILABLE (COMPRESSION_ERROR), every call on it with it,
// and a retry failed again. The refusal is INVALID_ARGUMENT naming the property and the rule,
// short.
func TestAHugeArgumentThatFailsItsSchemaIsRefusedNamingIt(t *testing.T) {
	tool := newFakeTool("lookup", returns("ok"))
	tool.def.InputSchema = args(t, map[string]any{
		"type": "object",
		"properties": map[string]any{
			"code":  map[string]any{"type": "string", "pattern": "^[A-Z]{3}$"},
			"codes": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		},
	})
	client := serve(t, action.Options{Tools: []action.Tool{tool}})
	many := make([]any, 200_000)
	for i := range many {
		many[i] = float64(i)
	}
	for name, tc := range map[string]struct {
		arguments map[string]any
		parts     []string
	}{
		"a value": {map[string]any{"code": strings.Repeat("\x01", 3<<20)},
			[]string{`"code": `, `does not match pattern '^[A-Z]{3}$'`}},
		"many values": {map[string]any{"codes": many},
			[]string{`"codes.0": got number, want string`, "199980 more"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := client.Execute(t.Context(), request(t, "lookup", tc.arguments))
			se := grpctest.WantStageError(t, err, codes.InvalidArgument,
				typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS, tc.parts...)
			if n := len(se.Error()); n > 16<<10 {
				t.Errorf("the refusal is %d bytes, want at most 16 KiB", n)
			}
		})
	}
	if n := tool.calls.Load(); n != 0 {
		t.Errorf("the tool ran %d times", n)
	}
}

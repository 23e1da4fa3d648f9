package action_test

import (
	"math"
	"strconv"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"google.golang.org/grpc/codes"
)

func TestCalculator(t *testing.T) {
	client := serve(t, action.Options{})
	table := []struct {
		expression string
		want       string // result on success
		wantErr    string // tool error otherwise
	}{
		{expression: "1 + 2", want: "3"},
		{expression: "6 * 7", want: "42"},
		{expression: "2 + 3 * 4", want: "14"},
		{expression: "(2 + 3) * 4", want: "20"},
		{expression: "10 - 2 - 3", want: "5"},
		{expression: "100 / 10 / 5", want: "2"},
		{expression: "1 / 2", want: "0.5"},
		{expression: "10 / 4", want: "2.5"},
		{expression: "7 % 3", want: "1"},
		{expression: "-7 % 3", want: "-1"},
		{expression: "2 * 3 % 4", want: "2"},
		{expression: "2 ^ 3 ^ 2", want: "512"},
		{expression: "(2 ^ 3) ^ 2", want: "64"},
		{expression: "2 * 3 ^ 2", want: "18"},
		{expression: "-2 ^ 2", want: "-4"},
		{expression: "(-2) ^ 2", want: "4"},
		{expression: "2 ^ -1", want: "0.5"},
		{expression: "--3", want: "3"},
		{expression: "3 - -2", want: "5"},
		{expression: "-(1 + 2) * 3", want: "-9"},
		{expression: "0.1 + 0.2", want: "0.3"},
		{expression: "1.50 * 2", want: "3"},
		{expression: ".5 + .25", want: "0.75"},
		{expression: "-0", want: "0"},
		{expression: " \t42\n ", want: "42"},
		{expression: "((((1))))", want: "1"},
		{expression: "1 / 0", wantErr: "division by zero at position 3"},
		{expression: "5 % (2 - 2)", wantErr: "modulo by zero at position 3"},
		{expression: "1 + * 2", wantErr: "unexpected '*' at position 5"},
		{expression: "+1", wantErr: "unexpected '+' at position 1"},
		{expression: "2 +", wantErr: "unexpected end of expression at position 4"},
		{expression: "(1 + 2", wantErr: "unclosed '(' at position 1"},
		{expression: "(1 + 2))", wantErr: "unexpected ')' at position 8"},
		{expression: "()", wantErr: "unexpected ')' at position 2"},
		{expression: "2 3", wantErr: "unexpected '3' at position 3"},
		{expression: "2 x 3", wantErr: "invalid character 'x' at position 3"},
		{expression: "2 × 3", wantErr: "invalid character '×' at position 3"},
		{expression: "1e3", wantErr: "invalid character 'e' at position 2"},
		{expression: "1.2.3", wantErr: `invalid number "1.2.3" at position 1`},
		{expression: "10 ^ 400", wantErr: "the result is not a finite number"},
		{expression: "(-8) ^ 0.5", wantErr: "the result is not a finite number"},
		// Finite, though 15 significant digits round it past the largest float64: it printed +Inf.
		{expression: "2^1023 * 1.9999999999999998", want: strconv.FormatFloat(math.MaxFloat64, 'f', -1, 64)},
		{expression: "   ", wantErr: "empty expression"},
	}
	for _, tc := range table {
		t.Run(tc.expression, func(t *testing.T) {
			resp, err := client.Execute(t.Context(), request(t, "calculator", map[string]any{"expression": tc.expression}))
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if tc.wantErr != "" {
				if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || resp.GetError() != tc.wantErr ||
					resp.GetErrorCode() != typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR {
					t.Fatalf("got status %v error %q code %v, want error %q", resp.GetStatus(), resp.GetError(), resp.GetErrorCode(), tc.wantErr)
				}
				return
			}
			if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != tc.want {
				t.Fatalf("got status %v result %q error %q, want %q", resp.GetStatus(), resp.GetResult(), resp.GetError(), tc.want)
			}
			if resp.GetServer() != action.BuiltinServer || resp.GetAttempts() != 1 || resp.GetCached() {
				t.Errorf("server %q attempts %d cached %v", resp.GetServer(), resp.GetAttempts(), resp.GetCached())
			}
		})
	}
}

func TestCalculatorArguments(t *testing.T) {
	client := serve(t, action.Options{})
	long := make([]byte, 1025)
	for i := range long {
		long[i] = '1'
	}
	table := []struct {
		name string
		args map[string]any
		want []string
	}{
		{"missing", map[string]any{}, []string{"calculator", "missing property 'expression'"}},
		{"not a string", map[string]any{"expression": 5}, []string{`"expression"`, "want string"}},
		{"empty", map[string]any{"expression": ""}, []string{`"expression"`, "minLength"}},
		{"too long", map[string]any{"expression": string(long)}, []string{`"expression"`, "maxLength"}},
		{"extra property", map[string]any{"expression": "1", "precision": 2}, []string{"precision", "not allowed"}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Execute(t.Context(), request(t, "calculator", tc.args))
			grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS, tc.want...)
		})
	}
}

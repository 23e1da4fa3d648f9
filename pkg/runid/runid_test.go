package runid_test

import (
	"strings"
	"testing"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// TestCheck: a run id is 1 to MaxBytes letters, digits, '_' and '-'; anything else is
// INVALID_INPUT saying what is wrong.
func TestCheck(t *testing.T) {
	tests := []struct {
		id      string
		wantErr string
	}{
		{"run-1", ""},
		{"Run_2024-01-01_abcDEF", ""},
		{strings.Repeat("a", runid.MaxBytes), ""},
		{"", "must not be empty"},
		{strings.Repeat("a", runid.MaxBytes+1), "at most 128"},
		{"run.1", `contains '.'`},
		{"run*", `contains '*'`},
		{"run>", `contains '>'`},
		{"run 1", `contains ' '`},
		{"rün", `contains 'ü'`},
	}
	for _, tt := range tests {
		err := runid.Check(tt.id)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("runid.Check(%q) = %v, want nil", tt.id, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("runid.Check(%q) = %v, want error containing %q", tt.id, err, tt.wantErr)
			continue
		}
		if se := stageerr.As(err); se == nil || se.Code != typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT {
			t.Errorf("runid.Check(%q) error %v is not INVALID_INPUT", tt.id, err)
		}
	}
}

package action_test

import (
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"testing"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/services/action"
	"google.golang.org/grpc/codes"
)

func TestCurrentTime(t *testing.T) {
	monday := time.Date(2026, time.January, 19, 9, 30, 0, 0, time.UTC)
	client := serve(t, action.Options{Now: func() time.Time { return monday }})
	table := []struct {
		name    string
		args    map[string]any
		want    string
		wantErr string
	}{
		{name: "default is UTC", args: map[string]any{},
			want: `{"time":"2026-01-19T09:30:00Z","weekday":"Monday","timezone":"UTC","abbreviation":"UTC"}`},
		{name: "empty is UTC", args: map[string]any{"timezone": ""},
			want: `{"time":"2026-01-19T09:30:00Z","weekday":"Monday","timezone":"UTC","abbreviation":"UTC"}`},
		{name: "Berlin", args: map[string]any{"timezone": "Europe/Berlin"},
			want: `{"time":"2026-01-19T10:30:00+01:00","weekday":"Monday","timezone":"Europe/Berlin","abbreviation":"CET"}`},
		{name: "Tokyo", args: map[string]any{"timezone": "Asia/Tokyo"},
			want: `{"time":"2026-01-19T18:30:00+09:00","weekday":"Monday","timezone":"Asia/Tokyo","abbreviation":"JST"}`},
		{name: "previous day", args: map[string]any{"timezone": "Pacific/Pago_Pago"},
			want: `{"time":"2026-01-18T22:30:00-11:00","weekday":"Sunday","timezone":"Pacific/Pago_Pago","abbreviation":"SST"}`},
		{name: "unknown zone", args: map[string]any{"timezone": "Mars/Olympus_Mons"},
			wantErr: `unknown timezone "Mars/Olympus_Mons": use an IANA name such as "Europe/Berlin" or "UTC"`},
		{name: "host zone", args: map[string]any{"timezone": "Local"},
			wantErr: `unknown timezone "Local": use an IANA name such as "Europe/Berlin" or "UTC"`},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.Execute(t.Context(), request(t, "current_time", tc.args))
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if tc.wantErr != "" {
				if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || resp.GetError() != tc.wantErr {
					t.Fatalf("got status %v error %q, want error %q", resp.GetStatus(), resp.GetError(), tc.wantErr)
				}
				return
			}
			if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != tc.want {
				t.Fatalf("got status %v result %s error %q\nwant %s", resp.GetStatus(), resp.GetResult(), resp.GetError(), tc.want)
			}
		})
	}

	t.Run("timezone must be a string", func(t *testing.T) {
		_, err := client.Execute(t.Context(), request(t, "current_time", map[string]any{"timezone": 2}))
		grpctest.WantStageError(t, err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS, `"timezone"`, "want string")
	})
}

package observation_test

import (
	"fmt"
	"strings"
	"testing"

	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/observation"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func client(t *testing.T, opts observation.Options) observationv1.ObservationServiceClient {
	t.Helper()
	return observationv1.NewObservationServiceClient(grpctest.Serve(t, observation.New(opts).Register))
}

const (
	success = typev1.ToolStatus_TOOL_STATUS_SUCCESS
	failure = typev1.ToolStatus_TOOL_STATUS_ERROR
	timeout = typev1.ToolStatus_TOOL_STATUS_TIMEOUT
)

func TestTruncation(t *testing.T) {
	c := client(t, observation.Options{})
	table := []struct {
		name      string
		raw       string
		maxBytes  int64
		want      string
		truncated bool
	}{
		{"no limit", strings.Repeat("a", 100), 0, strings.Repeat("a", 100), false},
		{"under the limit", "hello", 6, "hello", false},
		{"at the limit", "hello!", 6, "hello!", false},
		{"one over the limit", "hello!!", 6,
			"[TRUNCATED] Original size 7 bytes; truncated to 6 bytes.\nhello!", true},
		{"far over the limit", strings.Repeat("x", 20000), 12288,
			"[TRUNCATED] Original size 20000 bytes; truncated to 12288 bytes.\n" + strings.Repeat("x", 12288), true},
		// "é" is 2 bytes: a cut after "ab" + first byte of é keeps "ab".
		{"cut inside a 2-byte rune", "abéc", 3,
			"[TRUNCATED] Original size 5 bytes; truncated to 2 bytes.\nab", true},
		{"cut after a 2-byte rune", "abéc", 4,
			"[TRUNCATED] Original size 5 bytes; truncated to 4 bytes.\nabé", true},
		// "😀" is 4 bytes: cuts at 2, 3 and 4 bytes into it all keep only "a".
		{"cut 1 byte into a 4-byte rune", "a😀b", 2,
			"[TRUNCATED] Original size 6 bytes; truncated to 1 bytes.\na", true},
		{"cut 3 bytes into a 4-byte rune", "a😀b", 4,
			"[TRUNCATED] Original size 6 bytes; truncated to 1 bytes.\na", true},
		{"cut right after a 4-byte rune", "a😀b", 5,
			"[TRUNCATED] Original size 6 bytes; truncated to 5 bytes.\na😀", true},
		{"cut inside a 3-byte rune", "日本語", 5,
			"[TRUNCATED] Original size 9 bytes; truncated to 3 bytes.\n日", true},
		{"limit smaller than the first rune", "日本", 2,
			"[TRUNCATED] Original size 6 bytes; truncated to 0 bytes.\n", true},
		{"empty output", "", 10, observation.NoOutput, false},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{
				RawResult: tc.raw, ToolName: "fs__read", MaxBytes: tc.maxBytes, Status: success,
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetObservation() != tc.want {
				t.Errorf("observation = %q, want %q", resp.GetObservation(), tc.want)
			}
			if resp.GetTruncated() != tc.truncated {
				t.Errorf("truncated = %v, want %v", resp.GetTruncated(), tc.truncated)
			}
			if resp.GetOriginalBytes() != int64(len(tc.raw)) {
				t.Errorf("original_bytes = %d, want %d", resp.GetOriginalBytes(), len(tc.raw))
			}
			if !resp.GetShouldContinue() {
				t.Error("should_continue = false for an ordinary tool")
			}
		})
	}
}

func TestFailures(t *testing.T) {
	c := client(t, observation.Options{})
	table := []struct {
		name   string
		status typev1.ToolStatus
		errMsg string
		raw    string
		want   string
	}{
		{"error with a reason", failure, "permission denied: /etc/shadow", "partial", "(tool failed: permission denied: /etc/shadow)"},
		{"error without a reason", failure, "", "", "(tool failed: unknown error)"},
		{"timeout", timeout, "deadline exceeded after 30s", "", "(tool failed: timeout)"},
		{"interrupted by a restart (the action stage's interrupted response)", failure, "interrupted by a restart; it may or may not have run", "",
			"(tool failed: interrupted by a restart; it may or may not have run)"},
		{"final report tool failing still continues", failure, "bad json", "", "(tool failed: bad json)"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			tool := "web__fetch"
			if strings.HasPrefix(tc.name, "final report") {
				tool = "agent__final_report"
			}
			resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{
				RawResult: tc.raw, ToolName: tool, Status: tc.status, Error: tc.errMsg, MaxBytes: 200,
			})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetObservation() != tc.want {
				t.Errorf("observation = %q, want %q", resp.GetObservation(), tc.want)
			}
			if !resp.GetShouldContinue() || resp.GetTruncated() || resp.GetStructured() != nil {
				t.Errorf("continue %v truncated %v structured %v, want true false nil",
					resp.GetShouldContinue(), resp.GetTruncated(), resp.GetStructured())
			}
			if resp.GetOriginalBytes() != int64(len(tc.raw)) {
				t.Errorf("original_bytes = %d, want %d", resp.GetOriginalBytes(), len(tc.raw))
			}
		})
	}
}

// TestALongFailureIsTruncated: a failure's text is the tool's too (an MCP result marked
// isError is passed through whole), and over max_bytes it is truncated as a result is; it
// reached the model whole, megabytes of a stack trace past the run's budget.
func TestALongFailureIsTruncated(t *testing.T) {
	c := client(t, observation.Options{})
	reason := strings.Repeat("at frame\n", 100_000)
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{ToolName: "mcp__build", Status: failure, Error: reason, MaxBytes: 12 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetObservation(); len(got) > 12<<10+200 || !strings.HasPrefix(got, fmt.Sprintf("(tool failed: [TRUNCATED] Original size %d bytes", len(reason))) || !resp.GetTruncated() {
		t.Errorf("observation of a %d-byte failure: %d bytes, truncated %v, starting %.80q", len(reason), len(got), resp.GetTruncated(), got)
	}
}

// TestShouldContinue: every observation says the loop goes on, whatever the tool's name. The
// stage said stop after a successful tool named final_report or agent__final_report, a rule
// no run reaches: those are the orchestrator's own tools, which it answers itself, and no
// action tool may take their names (pkg/toolname).
func TestShouldContinue(t *testing.T) {
	c := client(t, observation.Options{})
	for _, tool := range []string{"final_report", "agent__final_report", "progress_report", "fs__final_report_x"} {
		for _, st := range []typev1.ToolStatus{success, typev1.ToolStatus_TOOL_STATUS_UNSPECIFIED} { // unspecified counts as success
			resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: "done", ToolName: tool, Status: st})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.GetShouldContinue() || !resp.GetSuccess() || resp.GetObservation() != "done" {
				t.Errorf("%s (%v): continue %v success %v observation %q, want true true \"done\"",
					tool, st, resp.GetShouldContinue(), resp.GetSuccess(), resp.GetObservation())
			}
		}
	}
}

func TestStructured(t *testing.T) {
	c := client(t, observation.Options{})
	raw := `  {"items": [1, 2, 3], "name": "report", "nested": {"ok": true}}`
	t.Run("object is parsed from the untruncated input", func(t *testing.T) {
		resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "api", MaxBytes: 10, Status: success})
		if err != nil {
			t.Fatal(err)
		}
		if !resp.GetTruncated() {
			t.Error("want the observation truncated")
		}
		m := resp.GetStructured().AsMap()
		if m["name"] != "report" || len(m["items"].([]any)) != 3 || m["nested"].(map[string]any)["ok"] != true {
			t.Errorf("structured = %v", m)
		}
	})
	t.Run("an array is structured as items", func(t *testing.T) {
		resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: ` [{"id": 1}, {"id": 2}]`, ToolName: "api", Status: success})
		if err != nil {
			t.Fatal(err)
		}
		if items := resp.GetStructured().AsMap()["items"].([]any); len(items) != 2 || items[1].(map[string]any)["id"] != 2.0 {
			t.Errorf("structured = %v", resp.GetStructured())
		}
	})
	t.Run("scalars are valid JSON but not structured", func(t *testing.T) {
		for _, raw := range []string{`42`, `"text"`} {
			resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: raw, ToolName: "api", ExpectJson: true, Status: success})
			if err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			if resp.GetStructured() != nil || resp.GetObservation() != raw {
				t.Errorf("%s: structured %v observation %q", raw, resp.GetStructured(), resp.GetObservation())
			}
		}
	})
	t.Run("broken JSON without expect_json is plain text", func(t *testing.T) {
		resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{RawResult: `{"a":`, ToolName: "api", Status: success})
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStructured() != nil || resp.GetObservation() != `{"a":` {
			t.Errorf("structured %v observation %q", resp.GetStructured(), resp.GetObservation())
		}
	})
}

func TestErrors(t *testing.T) {
	c := client(t, observation.Options{MaxInputBytes: 100})
	table := []struct {
		name  string
		req   *observationv1.ObserveRequest
		code  codes.Code
		stage typev1.StageErrorCode
		msg   []string
	}{
		{"empty tool name", &observationv1.ObserveRequest{RawResult: "x"},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"tool_name"}},
		// A name of megabytes went into logs, the output schema's URL and its errors.
		{"tool name over 512 bytes", &observationv1.ObserveRequest{RawResult: "x", ToolName: strings.Repeat("t", 513)},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"tool_name: at most 512 bytes, got 513"}},
		{"negative max_bytes", &observationv1.ObserveRequest{RawResult: "x", ToolName: "t", MaxBytes: -1},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"max_bytes", "-1"}},
		{"run id over 128 bytes", &observationv1.ObserveRequest{RawResult: "x", ToolName: "t", RunId: strings.Repeat("r", 129)},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"run_id: run id is 129 bytes long; at most 128 are allowed"}},
		{"run id with a dot", &observationv1.ObserveRequest{RawResult: "x", ToolName: "t", RunId: "run.1"},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{`run_id: run id "run.1" contains '.'`}},
		{"unknown status", &observationv1.ObserveRequest{RawResult: "x", ToolName: "t", Status: 42},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"status", "42"}},
		{"too large", &observationv1.ObserveRequest{RawResult: strings.Repeat("x", 101), ToolName: "t"},
			codes.ResourceExhausted, typev1.StageErrorCode_STAGE_ERROR_CODE_OBSERVATION_TOO_LARGE, []string{"101 bytes", "100 bytes"}},
		{"expect_json with trailing garbage", &observationv1.ObserveRequest{RawResult: `{"a": 1} x`, ToolName: "t", ExpectJson: true, Status: success},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR, []string{"not valid JSON", "at byte 10"}},
		{"expect_json with plain text", &observationv1.ObserveRequest{RawResult: `hello`, ToolName: "t", ExpectJson: true, Status: success},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR, []string{"not valid JSON", "at byte 1"}},
		{"expect_json with a cut-off object", &observationv1.ObserveRequest{RawResult: `{"a": [1, 2`, ToolName: "t", ExpectJson: true, Status: success},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR, []string{"unexpected end", "at byte 11"}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Observe(t.Context(), tc.req)
			if status.Code(err) != tc.code {
				t.Fatalf("code = %v (%v), want %v", status.Code(err), err, tc.code)
			}
			se := stageerr.FromError(err)
			if se.Code != tc.stage {
				t.Errorf("stage code = %v, want %v", se.Code, tc.stage)
			}
			for _, part := range tc.msg {
				if !strings.Contains(se.Error(), part) {
					t.Errorf("message %q does not mention %q", se.Error(), part)
				}
			}
		})
	}
}

// Failed executions are not parsed, so expect_json does not turn them into PARSE_ERROR.
func TestFailureIsNotParsed(t *testing.T) {
	c := client(t, observation.Options{})
	resp, err := c.Observe(t.Context(), &observationv1.ObserveRequest{
		RawResult: "not json", ToolName: "t", ExpectJson: true, Status: failure, Error: "boom",
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetObservation() != "(tool failed: boom)" {
		t.Errorf("observation = %q", resp.GetObservation())
	}
}

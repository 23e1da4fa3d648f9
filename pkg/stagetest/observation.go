package stagetest

import (
	"context"
	"fmt"
	"strings"

	observationv1 "github.com/agentmesh/agentmesh/gen/agentmesh/observation/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc/codes"
)

// noticeBytes is what an observation over max_bytes may add to it: a one-line notice saying
// it was truncated or summarised.
const noticeBytes = 200

var observationCases = []testCase{
	{"result-passes", "a small successful result is observed as it is: success, should_continue, not truncated, original_bytes",
		func(ctx context.Context, k *kit) error {
			resp, err := observe(ctx, k, &observationv1.ObserveRequest{RawResult: "42", ToolName: "calculator",
				Status: typev1.ToolStatus_TOOL_STATUS_SUCCESS, MaxBytes: 1000, RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			var p problems
			if !strings.Contains(resp.GetObservation(), "42") {
				p.addf("observation %q does not hold the result 42", resp.GetObservation())
			}
			if !resp.GetSuccess() || !resp.GetShouldContinue() || resp.GetTruncated() {
				p.addf("success=%v should_continue=%v truncated=%v, want true, true, false", resp.GetSuccess(), resp.GetShouldContinue(), resp.GetTruncated())
			}
			if resp.GetOriginalBytes() != 2 {
				p.addf("original_bytes %d, want 2", resp.GetOriginalBytes())
			}
			return p.err()
		}},
	{"large-result-shortened", fmt.Sprintf("a result of 20000 bytes with max_bytes 500 is truncated or summarised to at most 500 bytes plus a %d-byte notice", noticeBytes),
		func(ctx context.Context, k *kit) error {
			raw := strings.Repeat("0123456789", 2000)
			resp, err := observe(ctx, k, &observationv1.ObserveRequest{RawResult: raw, ToolName: "calculator",
				Status: typev1.ToolStatus_TOOL_STATUS_SUCCESS, MaxBytes: 500, RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			var p problems
			if n := len(resp.GetObservation()); n == 0 || n > 500+noticeBytes {
				p.addf("observation of %d bytes, want 1 to %d", n, 500+noticeBytes)
			}
			if !resp.GetTruncated() && !resp.GetSummarized() {
				p.addf("neither truncated nor summarized is set")
			}
			if resp.GetOriginalBytes() != int64(len(raw)) {
				p.addf("original_bytes %d, want %d", resp.GetOriginalBytes(), len(raw))
			}
			return p.err()
		}},
	{"no-limit", "max_bytes 0 means no limit: a result of 20000 bytes is observed whole, not truncated or summarised",
		func(ctx context.Context, k *kit) error {
			raw := strings.Repeat("0123456789", 2000)
			resp, err := observe(ctx, k, &observationv1.ObserveRequest{RawResult: raw, ToolName: "calculator",
				Status: typev1.ToolStatus_TOOL_STATUS_SUCCESS, RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			if !strings.Contains(resp.GetObservation(), raw) || resp.GetTruncated() || resp.GetSummarized() {
				return fmt.Errorf("observation of %d bytes (truncated=%v, summarized=%v), want the whole result of %d bytes",
					len(resp.GetObservation()), resp.GetTruncated(), resp.GetSummarized(), len(raw))
			}
			return nil
		}},
	{"failure-readable", "a failed execution is observed as a readable failure holding its reason, success false, should_continue (only a final report ends the loop)",
		func(ctx context.Context, k *kit) error {
			resp, err := observe(ctx, k, &observationv1.ObserveRequest{ToolName: "calculator", Status: typev1.ToolStatus_TOOL_STATUS_ERROR,
				Error: "division by zero", RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			var p problems
			if resp.GetSuccess() || !strings.Contains(resp.GetObservation(), "division by zero") {
				p.addf("success=%v observation %q, want success false and the reason in the observation", resp.GetSuccess(), resp.GetObservation())
			}
			if !resp.GetShouldContinue() {
				p.addf("should_continue false after a failed calculator: the orchestrator would make the next turn final, so the model could not try again")
			}
			return p.err()
		}},
	{"json-structured", "a JSON object result is parsed into structured",
		func(ctx context.Context, k *kit) error {
			resp, err := observe(ctx, k, &observationv1.ObserveRequest{RawResult: `{"answer": 42}`, ToolName: "calculator",
				Status: typev1.ToolStatus_TOOL_STATUS_SUCCESS, RunId: k.id("run")})
			if err != nil {
				return wantOK(err)
			}
			if v := resp.GetStructured().GetFields()["answer"]; v.GetNumberValue() != 42 {
				return fmt.Errorf("structured %v, want answer 42", resp.GetStructured())
			}
			return nil
		}},
	{"expect-json", "expect_json with a result that is not JSON is PARSE_ERROR (INVALID_ARGUMENT)",
		func(ctx context.Context, k *kit) error {
			_, err := observe(ctx, k, &observationv1.ObserveRequest{RawResult: "not json", ToolName: "calculator",
				Status: typev1.ToolStatus_TOOL_STATUS_SUCCESS, ExpectJson: true, RunId: k.id("run")})
			return wantFailure(err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR)
		}},
	{"output-schema", "a result that breaks the tool's output_schema is PARSE_ERROR (INVALID_ARGUMENT)",
		func(ctx context.Context, k *kit) error {
			_, err := observe(ctx, k, &observationv1.ObserveRequest{RawResult: `{"answer": "many"}`, ToolName: "calculator",
				Status: typev1.ToolStatus_TOOL_STATUS_SUCCESS, RunId: k.id("run"), OutputSchema: mustStruct(map[string]any{
					"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "number"}}, "required": []any{"answer"}})})
			return wantFailure(err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_PARSE_ERROR)
		}},
	{"empty-tool-name", "an empty tool_name is INVALID_ARGUMENT naming tool_name",
		func(ctx context.Context, k *kit) error {
			_, err := observe(ctx, k, &observationv1.ObserveRequest{RawResult: "42"})
			return wantInvalid(err, "tool_name")
		}},
	{"run-id-over-limit", "a run_id of 129 bytes is INVALID_ARGUMENT naming run_id",
		func(ctx context.Context, k *kit) error {
			_, err := observe(ctx, k, &observationv1.ObserveRequest{RawResult: "42", ToolName: "calculator", RunId: strings.Repeat("r", 129)})
			return wantInvalid(err, "run_id")
		}},
	{"negative-max-bytes", "a negative max_bytes is INVALID_ARGUMENT naming max_bytes",
		func(ctx context.Context, k *kit) error {
			_, err := observe(ctx, k, &observationv1.ObserveRequest{RawResult: "42", ToolName: "calculator", MaxBytes: -1})
			return wantInvalid(err, "max_bytes")
		}},
}

// observe sends one observation request.
func observe(ctx context.Context, k *kit, req *observationv1.ObserveRequest) (*observationv1.ObserveResponse, error) {
	return observationv1.NewObservationServiceClient(k.conn).Observe(ctx, req)
}

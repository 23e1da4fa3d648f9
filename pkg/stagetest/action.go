package stagetest

import (
	"context"
	"fmt"
	"strings"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/toolname"
	"google.golang.org/grpc/codes"
)

var actionCases = []testCase{
	{"lists-builtins", "ListTools lists calculator and current_time, every tool with a unique non-empty name the orchestrator does not reserve (final_report, agent__final_report, agent__progress_report)",
		func(ctx context.Context, k *kit) error {
			resp, err := actionv1.NewActionServiceClient(k.conn).ListTools(ctx, &actionv1.ListToolsRequest{})
			if err != nil {
				return wantOK(err)
			}
			return checkTools(resp.GetTools()).err()
		}},
	{"list-version", "a versioned tool list asked with its version answers unchanged without the tools; another version gets the list (an unversioned list passes)",
		func(ctx context.Context, k *kit) error {
			client := actionv1.NewActionServiceClient(k.conn)
			first, err := client.ListTools(ctx, &actionv1.ListToolsRequest{})
			if err != nil {
				return wantOK(err)
			}
			if first.GetVersion() == "" {
				return nil // the stage does not version its list: callers take it whole
			}
			same, err := client.ListTools(ctx, &actionv1.ListToolsRequest{KnownVersion: first.GetVersion()})
			if err != nil {
				return wantOK(err)
			}
			if !same.GetUnchanged() || len(same.GetTools()) != 0 || same.GetVersion() != first.GetVersion() {
				return fmt.Errorf("asked with its version %q: unchanged=%v, %d tools, version %q; want unchanged, no tools, the same version",
					first.GetVersion(), same.GetUnchanged(), len(same.GetTools()), same.GetVersion())
			}
			other, err := client.ListTools(ctx, &actionv1.ListToolsRequest{KnownVersion: k.id("version")})
			if err != nil {
				return wantOK(err)
			}
			if other.GetUnchanged() || len(other.GetTools()) != len(first.GetTools()) {
				return fmt.Errorf("asked with another version: unchanged=%v, %d tools; want the whole list of %d", other.GetUnchanged(), len(other.GetTools()), len(first.GetTools()))
			}
			return nil
		}},
	{"execute", `calculator {"expression": "6*7"} succeeds with a result of 42`,
		func(ctx context.Context, k *kit) error {
			resp, err := execute(ctx, k, "c-execute", "calculator", map[string]any{"expression": "6*7"})
			if err != nil {
				return wantOK(err)
			}
			return checkSuccess(resp, "42")
		}},
	{"repeated-call-cached", "a repeated (run_id, call_id) answers the recorded result, cached, " +
		"without running the tool again, whatever its arguments",
		func(ctx context.Context, k *kit) error {
			first, err := execute(ctx, k, "c-repeat", "calculator", map[string]any{"expression": "2+3"})
			if err != nil {
				return wantOK(err)
			}
			if err := checkSuccess(first, "5"); err != nil {
				return fmt.Errorf("the first call: %w", err)
			}
			// Other arguments: a tool run again would answer 6, and the same arguments
			// answer alike whether it ran again or not.
			again, err := execute(ctx, k, "c-repeat", "calculator", map[string]any{"expression": "2+4"})
			if err != nil {
				return wantOK(err)
			}
			if !again.GetCached() || again.GetResult() != first.GetResult() {
				return fmt.Errorf("the repeated call (arguments 2+4) answered cached=%v result %q, "+
					"want cached=true and the first result %q: the call ran again",
					again.GetCached(), again.GetResult(), first.GetResult())
			}
			return nil
		}},
	{"call-scoped-to-run", "a call id is its run's: the same call_id in another run is a new call, run with its own arguments, not cached",
		func(ctx context.Context, k *kit) error {
			if _, err := execute(ctx, k, "c-scope", "calculator", map[string]any{"expression": "2+3"}); err != nil {
				return fmt.Errorf("the first run's call: %w", wantOK(err))
			}
			resp, err := actionv1.NewActionServiceClient(k.conn).Execute(ctx, &actionv1.ExecuteRequest{
				RunId: k.id("run-other"), CallId: "c-scope", ToolName: "calculator",
				Arguments: mustStruct(map[string]any{"expression": "6*7"}), UserId: k.id("user")})
			if err != nil {
				return wantOK(err)
			}
			if resp.GetCached() {
				return fmt.Errorf("the other run's call answered cached with result %q: a call id names a call of one run (models number their calls call_1, call_2 … in every run)", resp.GetResult())
			}
			return checkSuccess(resp, "42")
		}},
	{"tool-failure-is-result", "a tool that runs and fails (1/0) answers OK with status error and error_code EXECUTION_ERROR",
		func(ctx context.Context, k *kit) error {
			resp, err := execute(ctx, k, "c-fail", "calculator", map[string]any{"expression": "1/0"})
			if err != nil {
				return wantOK(err)
			}
			var p problems
			if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR {
				p.addf("status %s, want TOOL_STATUS_ERROR", resp.GetStatus())
			}
			if resp.GetErrorCode() != typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR {
				p.addf("error_code %s, want EXECUTION_ERROR", resp.GetErrorCode())
			}
			if resp.GetError() == "" {
				p.addf("no error message")
			}
			return p.err()
		}},
	{"unknown-tool", "an unknown tool is TOOL_NOT_FOUND (NOT_FOUND)",
		func(ctx context.Context, k *kit) error {
			_, err := execute(ctx, k, "c-unknown", "no_such_tool", map[string]any{})
			return wantFailure(err, codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND)
		}},
	{"arguments-off-schema", "arguments that break the tool's schema are INVALID_ARGUMENTS (INVALID_ARGUMENT)",
		func(ctx context.Context, k *kit) error {
			_, err := execute(ctx, k, "c-badargs", "calculator", map[string]any{"expression": 42})
			return wantFailure(err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS)
		}},
	{"missing-argument", "arguments without a required property are INVALID_ARGUMENTS (INVALID_ARGUMENT)",
		func(ctx context.Context, k *kit) error {
			_, err := execute(ctx, k, "c-noargs", "calculator", map[string]any{})
			return wantFailure(err, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS)
		}},
	{"empty-run-id", "an empty run_id is INVALID_ARGUMENT naming run_id",
		func(ctx context.Context, k *kit) error {
			_, err := actionv1.NewActionServiceClient(k.conn).Execute(ctx, &actionv1.ExecuteRequest{
				CallId: "c", ToolName: "calculator", Arguments: mustStruct(map[string]any{"expression": "1+1"})})
			return wantInvalid(err, "run_id")
		}},
	{"run-id-over-limit", "a run_id of 129 bytes is INVALID_ARGUMENT naming run_id",
		func(ctx context.Context, k *kit) error {
			_, err := actionv1.NewActionServiceClient(k.conn).Execute(ctx, &actionv1.ExecuteRequest{
				RunId: strings.Repeat("r", 129), CallId: "c", ToolName: "calculator", Arguments: mustStruct(map[string]any{"expression": "1+1"})})
			return wantInvalid(err, "run_id")
		}},
	{"empty-call-id", "an empty call_id is INVALID_ARGUMENT naming call_id",
		func(ctx context.Context, k *kit) error {
			_, err := actionv1.NewActionServiceClient(k.conn).Execute(ctx, &actionv1.ExecuteRequest{
				RunId: k.id("run"), ToolName: "calculator", Arguments: mustStruct(map[string]any{"expression": "1+1"})})
			return wantInvalid(err, "call_id")
		}},
	{"user-id-over-limit", "a user_id of 257 bytes is INVALID_ARGUMENT naming user_id",
		func(ctx context.Context, k *kit) error {
			_, err := actionv1.NewActionServiceClient(k.conn).Execute(ctx, &actionv1.ExecuteRequest{
				RunId: k.id("run"), CallId: "c-user", ToolName: "calculator", UserId: strings.Repeat("u", 257),
				Arguments: mustStruct(map[string]any{"expression": "1+1"})})
			return wantInvalid(err, "user_id")
		}},
	{"negative-timeout", "a negative timeout_ms is INVALID_ARGUMENT naming timeout_ms",
		func(ctx context.Context, k *kit) error {
			_, err := actionv1.NewActionServiceClient(k.conn).Execute(ctx, &actionv1.ExecuteRequest{
				RunId: k.id("run"), CallId: "c-timeout", ToolName: "calculator", TimeoutMs: -1,
				Arguments: mustStruct(map[string]any{"expression": "1+1"})})
			return wantInvalid(err, "timeout_ms")
		}},
}

// checkTools returns how a tool list breaks the contract of ListTools: every tool has a
// unique non-empty name that is not reserved for one of the orchestrator's own tools, and the
// built-in calculator and current_time are listed.
func checkTools(tools []*typev1.Tool) problems {
	var p problems
	seen := map[string]bool{}
	for i, t := range tools {
		switch name := t.GetName(); {
		case name == "":
			p.addf("tools[%d] has no name", i)
		case seen[name]:
			p.addf("tool %q is listed twice", name)
		case toolname.Reserved(name):
			p.addf("tool %q has a name reserved for one of the orchestrator's own tools (%s)", name, toolname.ReservedNames())
		}
		seen[t.GetName()] = true
	}
	for _, name := range []string{"calculator", "current_time"} {
		if !seen[name] {
			p.addf("%s is not listed", name)
		}
	}
	return p
}

// execute runs one call of the kit's run.
func execute(ctx context.Context, k *kit, callID, tool string, args map[string]any) (*actionv1.ExecuteResponse, error) {
	return actionv1.NewActionServiceClient(k.conn).Execute(ctx, &actionv1.ExecuteRequest{
		RunId: k.id("run"), CallId: callID, ToolName: tool, Arguments: mustStruct(args), UserId: k.id("user")})
}

// checkSuccess returns how a response differs from a successful execution whose result holds
// want.
func checkSuccess(resp *actionv1.ExecuteResponse, want string) error {
	var p problems
	if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS {
		p.addf("status %s (%s), want TOOL_STATUS_SUCCESS", resp.GetStatus(), resp.GetError())
	}
	if !strings.Contains(resp.GetResult(), want) {
		p.addf("result %q does not hold %q", resp.GetResult(), want)
	}
	if resp.GetExecutionTimeMs() < 0 {
		p.addf("execution_time_ms %d is negative", resp.GetExecutionTimeMs())
	}
	if c := resp.GetErrorCode(); c != typev1.StageErrorCode_STAGE_ERROR_CODE_UNSPECIFIED {
		p.addf("error_code %s on a success", c)
	}
	return p.err()
}

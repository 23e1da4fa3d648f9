package action_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/services/action"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestValidationOrder sends requests that break several rules at once and asserts that the
// first rule in contract order decides the answer.
// TestUserIDAtTheLimit: a user_id of 256 bytes, the longest the public API takes, is acted
// for (TestValidationOrder refuses one byte more).
func TestUserIDAtTheLimit(t *testing.T) {
	client := serve(t, action.Options{})
	req := request(t, "calculator", map[string]any{"expression": "6*7"})
	req.UserId = strings.Repeat("u", 256)
	resp, err := client.Execute(t.Context(), req)
	if err != nil {
		t.Fatalf("a user_id of 256 bytes was refused: %v", err)
	}
	if resp.GetResult() != "42" {
		t.Errorf("result = %q, want 42", resp.GetResult())
	}
}

func TestValidationOrder(t *testing.T) {
	deleteNote := newFakeTool("delete_note", returns("deleted"))
	deleteNote.def.InputSchema = args(t, map[string]any{
		"type":     "object",
		"required": []any{"id"},
	})
	client := serve(t, action.Options{Tools: []action.Tool{deleteNote}})

	// An executed call fills the cache for run "r" call "done".
	first := &actionv1.ExecuteRequest{RunId: "r", CallId: "done", ToolName: "calculator", Arguments: args(t, map[string]any{"expression": "1+1"})}
	if resp, err := client.Execute(t.Context(), first); err != nil || resp.GetResult() != "2" {
		t.Fatalf("first call: %v %v", resp, err)
	}

	bad := args(t, map[string]any{"wrong": true})
	unchecked := &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "delete_note", Arguments: bad}
	grantNil := &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "delete_note"}
	http := actionv1.ExecutionMode_EXECUTION_MODE_HTTP
	table := []struct {
		name     string
		req      *actionv1.ExecuteRequest
		grpcCode codes.Code
		code     typev1.StageErrorCode
		parts    []string
	}{
		{"run_id first", &actionv1.ExecuteRequest{CallId: "", ToolName: "", TimeoutMs: -1},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"run_id must not be empty"}},
		{"then call_id", &actionv1.ExecuteRequest{RunId: "r", ToolName: "", TimeoutMs: -1},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"call_id must not be empty"}},
		{"then tool_name", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", TimeoutMs: -1},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"tool_name must not be empty"}},
		{"then timeout_ms", &actionv1.ExecuteRequest{RunId: "r", CallId: "done", ToolName: "nope", TimeoutMs: -1},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"timeout_ms", "got -1"}},
		{"oversized id", &actionv1.ExecuteRequest{RunId: "r", CallId: string(make([]byte, 513)), ToolName: "calculator"},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"call_id must be at most 512 bytes"}},
		// The README's rule for the run_id of every call that names a run.
		{"run id over 128 bytes", &actionv1.ExecuteRequest{RunId: strings.Repeat("r", 129), CallId: "c", ToolName: "calculator"},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"run_id: run id is 129 bytes long; at most 128 are allowed"}},
		{"run id with a dot", &actionv1.ExecuteRequest{RunId: "run.1", CallId: "c", ToolName: "calculator"},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{`run_id: run id "run.1" contains '.' at byte 3`}},
		// The user is recorded with the call and sent to MCP and REST tools: it was taken at any
		// size, then at 512 bytes, twice the public API's and every other stage's 256.
		{"oversized user_id", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "calculator", UserId: strings.Repeat("u", 257)},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"user_id must be at most 256 bytes, got 257"}},
		{"unknown mode", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "calculator", Mode: 9},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"unknown execution mode 9"}},
		{"cached call reused for another tool", &actionv1.ExecuteRequest{RunId: "r", CallId: "done", ToolName: "nope", Mode: http, Arguments: bad},
			codes.FailedPrecondition, typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION, []string{"call id reused for another tool", `"calculator"`, `"nope"`}},
		{"then unknown tool", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "nope", Mode: http, Arguments: bad},
			codes.NotFound, typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND, []string{`unknown tool "nope"`, "available tools: calculator, current_time, delete_note"}},
		{"then direct mode only", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "delete_note", Mode: http, Arguments: bad},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, []string{"tool delete_note runs only in direct mode"}},
		{"then approval", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "delete_note", Arguments: bad},
			codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, []string{"tool delete_note requires approval"}},
		{"a refused approval is no approval", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "delete_note", Arguments: bad, Approval: &actionv1.Approval{Approver: "ops"}},
			codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, []string{"tool delete_note requires approval"}},
		{"an approved flag without a grant is no approval", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "delete_note", Arguments: bad, Approval: &actionv1.Approval{Approved: true}},
			codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, []string{"tool delete_note requires approval", "the call carries no grant"}},
		{"then arguments", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "delete_note", Arguments: bad, Approval: approved(t, unchecked)},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS, []string{"invalid arguments for tool delete_note", "missing property 'id'"}},
		{"nil arguments are an empty object", &actionv1.ExecuteRequest{RunId: "r", CallId: "c", ToolName: "delete_note", Approval: approved(t, grantNil)},
			codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS, []string{"missing property 'id'"}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.Execute(t.Context(), tc.req)
			grpctest.WantStageError(t, err, tc.grpcCode, tc.code, tc.parts...)
		})
	}
	if n := deleteNote.calls.Load(); n != 0 {
		t.Errorf("a refused call executed the tool %d times", n)
	}

	t.Run("the cache answers before any other check", func(t *testing.T) {
		again := &actionv1.ExecuteRequest{RunId: "r", CallId: "done", ToolName: "calculator", Mode: http, Arguments: bad}
		resp, err := client.Execute(t.Context(), again)
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if !resp.GetCached() || resp.GetResult() != "2" {
			t.Fatalf("got %v, want the cached result 2", resp)
		}
	})
}

func TestApproval(t *testing.T) {
	deleteNote := newFakeTool("delete_note", returns("deleted"))
	client := serve(t, action.Options{Tools: []action.Tool{deleteNote}})
	req := request(t, "delete_note", map[string]any{"id": "n1"})

	_, err := client.Execute(t.Context(), req)
	grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "tool delete_note requires approval")
	if n := deleteNote.calls.Load(); n != 0 {
		t.Fatalf("unapproved call executed %d times", n)
	}

	req.Approval = &actionv1.Approval{Approved: true, Approver: "ops", Feedback: "fine"}
	_, err = client.Execute(t.Context(), req)
	grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "the call carries no grant")
	if n := deleteNote.calls.Load(); n != 0 {
		t.Fatalf("a call approved without a grant executed %d times", n)
	}

	req.Approval = approved(t, req)
	resp, err := client.Execute(t.Context(), req)
	if err != nil {
		t.Fatalf("approved call: %v", err)
	}
	if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS || resp.GetResult() != "deleted" || resp.GetCached() {
		t.Fatalf("approved call: %v", resp)
	}
	if n := deleteNote.calls.Load(); n != 1 {
		t.Fatalf("approved call executed %d times, want 1", n)
	}

	t.Run("forged, replayed and expired grants are refused", func(t *testing.T) {
		_, foreignKey := grant.GenerateKey()
		fresh := func() *actionv1.ExecuteRequest { return request(t, "delete_note", map[string]any{"id": "n9"}) }
		forged, replayed, expired := fresh(), fresh(), fresh()
		forged.Approval = &actionv1.Approval{Approved: true, Grant: signed(t, grant.NewSigner(foreignKey), forged, "", time.Hour)}
		replayed.Approval = approved(t, req) // the grant of another call
		expired.Approval = &actionv1.Approval{Approved: true, Grant: signed(t, testSigner, expired, "", -time.Second)}
		for name, tc := range map[string]struct {
			req  *actionv1.ExecuteRequest
			want string
		}{
			"forged":   {forged, "not an orchestrator key"},
			"replayed": {replayed, "granted for call"},
			"expired":  {expired, "expired at"},
		} {
			_, err := client.Execute(t.Context(), tc.req)
			grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, tc.want)
			if n := deleteNote.calls.Load(); n != 1 {
				t.Fatalf("%s: the tool ran %d times, want 1 (the approved call only)", name, n)
			}
		}
	})

	t.Run("the cached result needs a grant too", func(t *testing.T) {
		again := request(t, "delete_note", map[string]any{"id": "n1"})
		again.RunId, again.CallId = req.GetRunId(), req.GetCallId()
		again.Approval = &actionv1.Approval{Approved: true}
		_, err := client.Execute(t.Context(), again)
		grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "the call carries no grant")
		other := request(t, "delete_note", map[string]any{"id": "n2"})
		other.RunId, other.CallId = req.GetRunId(), req.GetCallId()
		again.Approval = approved(t, other) // a grant of the same call id with other arguments
		_, err = client.Execute(t.Context(), again)
		grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "granted for other arguments")
		again.Approval = approved(t, again)
		if resp, err := client.Execute(t.Context(), again); err != nil || !resp.GetCached() || resp.GetResult() != "deleted" {
			t.Fatalf("with its grant: %v %v, want the cached result", resp, err)
		}
		if n := deleteNote.calls.Load(); n != 1 {
			t.Fatalf("the tool ran %d times, want 1", n)
		}
	})

	t.Run("exempted by configuration", func(t *testing.T) {
		exempt := newFakeTool("delete_note", returns("deleted"))
		client := serve(t, action.Options{Tools: []action.Tool{exempt}, NoApproval: []string{"delete_note"}})
		resp, err := client.Execute(t.Context(), request(t, "delete_note", nil))
		if err != nil || resp.GetResult() != "deleted" {
			t.Fatalf("exempt tool: %v %v", resp, err)
		}
	})
}

func TestExecuteCallArguments(t *testing.T) {
	var got action.Call
	echo := newFakeTool("echo", func(_ context.Context, call action.Call) (string, error) {
		got = call
		return "ok", nil
	})
	client := serve(t, action.Options{Tools: []action.Tool{echo}})
	req := &actionv1.ExecuteRequest{RunId: "run-7", CallId: "call-3", ToolName: "echo", UserId: "alice",
		Arguments: args(t, map[string]any{"n": 2, "tags": []any{"a"}})}
	resp, err := client.Execute(t.Context(), req)
	if err != nil || resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_SUCCESS {
		t.Fatalf("Execute: %v %v", resp, err)
	}
	if got.UserID != "alice" || got.RunID != "run-7" || got.CallID != "call-3" ||
		got.Arguments["n"] != float64(2) || fmt.Sprint(got.Arguments["tags"]) != "[a]" {
		t.Fatalf("tool got %+v", got)
	}
	if resp.GetServer() != action.BuiltinServer {
		t.Errorf("server = %q, want %q for an in-process tool", resp.GetServer(), action.BuiltinServer)
	}
}

func TestExecutionModes(t *testing.T) {
	remote := newFakeTool("remote_lookup", returns("found"))
	remote.def.Server = "rest"
	client := serve(t, action.Options{Tools: []action.Tool{remote}})
	for _, mode := range []actionv1.ExecutionMode{
		actionv1.ExecutionMode_EXECUTION_MODE_UNSPECIFIED,
		actionv1.ExecutionMode_EXECUTION_MODE_DIRECT,
		actionv1.ExecutionMode_EXECUTION_MODE_HTTP,
	} {
		req := request(t, "remote_lookup", nil)
		req.Mode = mode
		resp, err := client.Execute(t.Context(), req)
		if err != nil || resp.GetResult() != "found" || resp.GetServer() != "rest" {
			t.Errorf("mode %v: %v %v", mode, resp, err)
		}
	}
	for _, mode := range []actionv1.ExecutionMode{actionv1.ExecutionMode_EXECUTION_MODE_UNSPECIFIED, actionv1.ExecutionMode_EXECUTION_MODE_DIRECT} {
		req := request(t, "calculator", map[string]any{"expression": "2*2"})
		req.Mode = mode
		if resp, err := client.Execute(t.Context(), req); err != nil || resp.GetResult() != "4" {
			t.Errorf("built-in in mode %v: %v %v", mode, resp, err)
		}
	}
}

func TestExecutionFailures(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })

	failing := newFakeTool("failing", func(context.Context, action.Call) (string, error) {
		return "", errors.New("disk on fire")
	})
	panicking := newFakeTool("panicking", func(context.Context, action.Call) (string, error) {
		panic("index out of range")
	})
	blocking := newFakeTool("blocking", func(ctx context.Context, _ action.Call) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	stubborn := newFakeTool("stubborn", func(context.Context, action.Call) (string, error) {
		<-release // ignores cancellation
		return "too late", nil
	})
	client := serve(t, action.Options{
		Tools:          []action.Tool{failing, panicking, blocking, stubborn},
		DefaultTimeout: 20 * time.Millisecond,
	})

	table := []struct {
		name      string
		tool      *fakeTool
		timeoutMs int64
		status    typev1.ToolStatus
		errText   string
		code      typev1.StageErrorCode
	}{
		{"tool error", failing, 0, typev1.ToolStatus_TOOL_STATUS_ERROR, "disk on fire", typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR},
		{"tool panic", panicking, 0, typev1.ToolStatus_TOOL_STATUS_ERROR, "tool panicking failed unexpectedly", typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR},
		{"timeout from request", blocking, 30, typev1.ToolStatus_TOOL_STATUS_TIMEOUT, "timeout", typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT},
		{"default timeout", blocking, 0, typev1.ToolStatus_TOOL_STATUS_TIMEOUT, "timeout", typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT},
		{"tool ignoring cancellation", stubborn, 30, typev1.ToolStatus_TOOL_STATUS_TIMEOUT, "timeout", typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.tool.calls.Load()
			req := request(t, tc.tool.def.GetName(), nil)
			req.TimeoutMs = tc.timeoutMs
			resp, err := client.Execute(t.Context(), req)
			if err != nil {
				t.Fatalf("an executed call must answer in the response, got error %v", err)
			}
			if resp.GetStatus() != tc.status || resp.GetError() != tc.errText || resp.GetErrorCode() != tc.code ||
				resp.GetResult() != "" || resp.GetAttempts() != 1 || resp.GetCached() {
				t.Fatalf("got %v", resp)
			}
			if tc.status == typev1.ToolStatus_TOOL_STATUS_TIMEOUT && resp.GetExecutionTimeMs() < 20 {
				t.Errorf("execution_time_ms = %d, want at least the timeout", resp.GetExecutionTimeMs())
			}

			again, err := client.Execute(t.Context(), req)
			if err != nil || !again.GetCached() || again.GetStatus() != tc.status || again.GetErrorCode() != tc.code {
				t.Fatalf("repeated call: %v %v, want the cached failure", again, err)
			}
			if n := tc.tool.calls.Load() - before; n != 1 {
				t.Fatalf("tool executed %d times, want 1", n)
			}
		})
	}
}

func TestTransientRetries(t *testing.T) {
	var flakyFailures atomic.Int32
	flakyFailures.Store(2)
	flaky := newFakeTool("flaky", func(context.Context, action.Call) (string, error) {
		if flakyFailures.Add(-1) >= 0 {
			return "", fmt.Errorf("%w: upstream returned 503", action.ErrTransient)
		}
		return "recovered", nil
	})
	down := newFakeTool("down", func(context.Context, action.Call) (string, error) {
		return "", fmt.Errorf("%w: upstream returned 503", action.ErrTransient)
	})
	broken := newFakeTool("broken", func(context.Context, action.Call) (string, error) {
		return "", errors.New("bad request")
	})
	// Attempts that sent nothing are retried but not counted: attempts are the requests the
	// backend may have received.
	unreachable := newFakeTool("unreachable", func(context.Context, action.Call) (string, error) {
		return "", fmt.Errorf("%w: %w: connection refused", action.ErrTransient, action.ErrNotSent)
	})
	client := serve(t, action.Options{Tools: []action.Tool{flaky, down, broken, unreachable}, RetryBase: time.Millisecond})

	table := []struct {
		tool     *fakeTool
		status   typev1.ToolStatus
		result   string
		errText  string
		attempts int32
		calls    int32
	}{
		{flaky, typev1.ToolStatus_TOOL_STATUS_SUCCESS, "recovered", "", 3, 3},
		{down, typev1.ToolStatus_TOOL_STATUS_ERROR, "", "transient tool failure: upstream returned 503", 4, 4},
		{broken, typev1.ToolStatus_TOOL_STATUS_ERROR, "", "bad request", 1, 1},
		{unreachable, typev1.ToolStatus_TOOL_STATUS_ERROR, "", "transient tool failure: nothing was sent to the tool's backend: connection refused", 0, 4},
	}
	for _, tc := range table {
		t.Run(tc.tool.def.GetName(), func(t *testing.T) {
			req := request(t, tc.tool.def.GetName(), nil)
			resp, err := client.Execute(t.Context(), req)
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if resp.GetStatus() != tc.status || resp.GetResult() != tc.result || resp.GetError() != tc.errText || resp.GetAttempts() != tc.attempts {
				t.Fatalf("got %v", resp)
			}
			if n := tc.tool.calls.Load(); n != tc.calls {
				t.Fatalf("tool called %d times, want %d", n, tc.calls)
			}
			again, err := client.Execute(t.Context(), req)
			if err != nil || !again.GetCached() || again.GetAttempts() != tc.attempts || tc.tool.calls.Load() != tc.calls {
				t.Fatalf("repeated call: %v %v; calls %d", again, err, tc.tool.calls.Load())
			}
		})
	}

	t.Run("no retry that cannot fit in the timeout", func(t *testing.T) {
		slow := newFakeTool("slow_backoff", func(context.Context, action.Call) (string, error) {
			return "", fmt.Errorf("%w: busy", action.ErrTransient)
		})
		client := serve(t, action.Options{Tools: []action.Tool{slow}, RetryBase: time.Hour})
		resp, err := client.Execute(t.Context(), request(t, "slow_backoff", nil))
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		if resp.GetStatus() != typev1.ToolStatus_TOOL_STATUS_ERROR || resp.GetAttempts() != 1 || slow.calls.Load() != 1 {
			t.Fatalf("got %v after %d calls", resp, slow.calls.Load())
		}
	})
}

// countingServer counts Execute requests that reached the server.
type countingServer struct {
	actionv1.ActionServiceServer
	entered chan struct{}
}

func (c *countingServer) Execute(ctx context.Context, req *actionv1.ExecuteRequest) (*actionv1.ExecuteResponse, error) {
	c.entered <- struct{}{}
	return c.ActionServiceServer.Execute(ctx, req)
}

func TestNeverExecutesTwice(t *testing.T) {
	t.Run("sequential", func(t *testing.T) {
		counter := newFakeTool("counter", returns("counted"))
		client := serve(t, action.Options{Tools: []action.Tool{counter}})
		req := request(t, "counter", map[string]any{"x": 1})
		for i := range 3 {
			resp, err := client.Execute(t.Context(), req)
			if err != nil || resp.GetResult() != "counted" || resp.GetCached() != (i > 0) {
				t.Fatalf("call %d: %v %v", i, resp, err)
			}
		}
		if n := counter.calls.Load(); n != 1 {
			t.Fatalf("executed %d times, want 1", n)
		}
		other := request(t, "counter", map[string]any{"x": 1})
		if resp, err := client.Execute(t.Context(), other); err != nil || resp.GetCached() || counter.calls.Load() != 2 {
			t.Fatalf("a new call id must execute: %v %v", resp, err)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		const n = 10
		gate := make(chan struct{})
		counter := newFakeTool("counter", func(context.Context, action.Call) (string, error) {
			<-gate
			return "counted", nil
		})
		svc, err := action.New(action.Options{Tools: []action.Tool{counter}})
		if err != nil {
			t.Fatal(err)
		}
		cs := &countingServer{ActionServiceServer: svc, entered: make(chan struct{}, n)}
		client := actionv1.NewActionServiceClient(serveServer(t, cs))

		req := request(t, "counter", nil)
		type answer struct {
			resp *actionv1.ExecuteResponse
			err  error
		}
		answers := make(chan answer, n)
		for range n {
			go func() {
				resp, err := client.Execute(t.Context(), req)
				answers <- answer{resp, err}
			}()
		}
		for range n { // every request is inside the handler before the tool may finish
			<-cs.entered
		}
		close(gate)
		executed := 0
		for range n {
			a := <-answers
			if a.err != nil || a.resp.GetResult() != "counted" {
				t.Fatalf("answer: %v %v", a.resp, a.err)
			}
			if !a.resp.GetCached() {
				executed++
			}
		}
		if executed != 1 || counter.calls.Load() != 1 {
			t.Fatalf("%d uncached answers, %d executions; want 1 and 1", executed, counter.calls.Load())
		}
	})

	t.Run("a cancelled client does not lose the result", func(t *testing.T) {
		gate := make(chan struct{})
		started := make(chan struct{})
		counter := newFakeTool("counter", func(context.Context, action.Call) (string, error) {
			close(started)
			<-gate
			return "counted", nil
		})
		client := serve(t, action.Options{Tools: []action.Tool{counter}})
		req := request(t, "counter", nil)
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := client.Execute(ctx, req)
			errc <- err
		}()
		<-started
		cancel()
		if err := <-errc; status.Code(err) != codes.Canceled {
			t.Fatalf("cancelled client got %v", err)
		}
		close(gate)
		resp, err := client.Execute(t.Context(), req)
		if err != nil || resp.GetResult() != "counted" || !resp.GetCached() || counter.calls.Load() != 1 {
			t.Fatalf("resumed call: %v %v after %d executions", resp, err, counter.calls.Load())
		}
	})

	t.Run("bounded cache evicts the least recently used", func(t *testing.T) {
		counter := newFakeTool("counter", returns("counted"))
		client := serve(t, action.Options{Tools: []action.Tool{counter}, CacheSize: 2})
		a, b, c := request(t, "counter", nil), request(t, "counter", nil), request(t, "counter", nil)
		for _, req := range []*actionv1.ExecuteRequest{a, b, a, c} { // c evicts b, the least recent
			if _, err := client.Execute(t.Context(), req); err != nil {
				t.Fatal(err)
			}
		}
		if n := counter.calls.Load(); n != 3 {
			t.Fatalf("executed %d times, want 3", n)
		}
		if resp, _ := client.Execute(t.Context(), a); !resp.GetCached() {
			t.Error("a was evicted, want b evicted")
		}
		if resp, _ := client.Execute(t.Context(), b); resp.GetCached() || counter.calls.Load() != 4 {
			t.Errorf("b should have been evicted and executed again: %v", resp)
		}
	})
}

// TestCachedResultIsTheUsersOwn: the result of a call is returned again only to a request that
// acts for the same user (its metadata's, else its user_id), never to one that reuses another
// user's run and call id.
func TestCachedResultIsTheUsersOwn(t *testing.T) {
	client := serve(t, action.Options{})
	req := request(t, "calculator", map[string]any{"expression": "6*7"})
	ctx := auth.OutgoingUser(t.Context(), "acme/alice")
	if resp, err := client.Execute(ctx, req); err != nil || resp.GetResult() != "42" {
		t.Fatalf("alice's call: %v %v", resp, err)
	}
	_, err := client.Execute(auth.OutgoingUser(t.Context(), "acme/bob"), req)
	grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "acted for another user")
	_, err = client.Execute(t.Context(), req) // no metadata: its user_id, user-1
	grpctest.WantStageError(t, err, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "acted for another user")
	if resp, err := client.Execute(ctx, req); err != nil || !resp.GetCached() || resp.GetResult() != "42" {
		t.Fatalf("alice again: %v %v, want her cached result", resp, err)
	}
}

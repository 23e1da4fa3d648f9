package action

import (
	"context"
	"strings"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/grant"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/schema"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/proto"
)

// Request limits.
const (
	maxIDLength = 512
	maxTimeout  = 24 * time.Hour
)

// Execute runs one tool call at most once per (run_id, call_id) across every replica that
// shares the ledger. A call the ledger has done returns its recorded response, marked cached,
// without running anything; a call it has started elsewhere is awaited, or, when that
// execution died, run again if its tool is idempotent and answered as interrupted if not; a
// new call is admitted, run and recorded.
//
// The request is checked before its span starts: the span of a request refused for its own
// fields names none of them (see refusedSpan).
func (s *Service) Execute(ctx context.Context, req *actionv1.ExecuteRequest) (*actionv1.ExecuteResponse, error) {
	if err := validateRequest(req); err != nil {
		span := s.refusedSpan(ctx)
		defer span.End()
		endSpan(span, nil, err)
		return nil, err
	}
	ctx, span := s.startSpan(ctx, req)
	defer span.End()
	resp, err := s.execute(ctx, req)
	endSpan(span, resp, err)
	return resp, err
}

// execute runs a request validateRequest accepted.
func (s *Service) execute(ctx context.Context, req *actionv1.ExecuteRequest) (*actionv1.ExecuteResponse, error) {
	key := callKey{runID: req.GetRunId(), callID: req.GetCallId()}
	out, own, err := s.settleOnce(ctx, key, req)
	if err != nil {
		return nil, err
	}
	if !own || !out.fresh {
		return s.cachedResponse(ctx, out, key, req)
	}
	return out.resp, nil
}

// validateRequest checks the request's own fields: the run id is one (runid.Check, as for
// every call that names a run), the other ids are set and at most maxIDLength bytes, and the
// user is at most auth.MaxIDBytes and holds no control character (auth.CheckControl), and the
// arguments hold no number JSON cannot (checkFinite).
func validateRequest(req *actionv1.ExecuteRequest) error {
	if req.GetRunId() == "" {
		return stageerr.Invalid("run_id must not be empty")
	}
	if err := runid.CheckField("run_id", req.GetRunId()); err != nil {
		return err
	}
	for _, f := range []struct{ name, value string }{
		{"call_id", req.GetCallId()},
		{"tool_name", req.GetToolName()},
	} {
		if f.value == "" {
			return stageerr.Invalid("%s must not be empty", f.name)
		}
		if len(f.value) > maxIDLength {
			return stageerr.Invalid("%s must be at most %d bytes, got %d", f.name, maxIDLength, len(f.value))
		}
	}
	if n := len(req.GetUserId()); n > auth.MaxIDBytes { // may be empty: a call for no user
		return stageerr.Invalid("user_id must be at most %d bytes, got %d", auth.MaxIDBytes, n)
	}
	if err := auth.CheckControl("user_id", req.GetUserId()); err != nil {
		return err
	}
	if err := checkFinite(req.GetArguments()); err != nil {
		return err
	}
	if ms := req.GetTimeoutMs(); ms < 0 || ms > maxTimeout.Milliseconds() {
		return stageerr.Invalid("timeout_ms must be between 0 (the default) and %d, got %d", maxTimeout.Milliseconds(), ms)
	}
	if _, ok := actionv1.ExecutionMode_name[int32(req.GetMode())]; !ok {
		return stageerr.Invalid("unknown execution mode %d", req.GetMode())
	}
	return nil
}

// cachedResponse returns an earlier outcome for a request, which must name the tool the call
// id ran, act for the user it acted for and, for a tool that requires approval, carry a grant
// for the call.
func (s *Service) cachedResponse(ctx context.Context, out outcome, key callKey, req *actionv1.ExecuteRequest) (*actionv1.ExecuteResponse, error) {
	if err := checkTool(key, out.tool, req.GetToolName()); err != nil {
		return nil, err
	}
	// A record without a user was written before records named one.
	if user := actingUser(ctx, req); out.user != "" && out.user != user {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
			"call %q of run %q acted for another user than %q", key.callID, key.runID, user)
	}
	if err := s.checkGrant(ctx, req); err != nil {
		return nil, err
	}
	resp := proto.CloneOf(out.resp)
	resp.Cached = true
	return resp, nil
}

// checkTool refuses a request that reuses the id of a call of another tool.
func checkTool(key callKey, ran, requested string) error {
	if ran == requested {
		return nil
	}
	return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
		"call id reused for another tool: call %q of run %q already ran %q, not %q", key.callID, key.runID, ran, requested)
}

// admit checks, in order, that the tool exists, runs in the requested mode, carries an
// approval grant when it must and gets arguments that match its schema; it returns the tool and
// the arguments.
func (s *Service) admit(ctx context.Context, req *actionv1.ExecuteRequest) (
	*registered, map[string]any, error) {
	name := req.GetToolName()
	tools := s.registry()
	reg, ok := tools.lookup(name)
	if !ok {
		return nil, nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND,
			"unknown tool %q; available tools: %s", name, strings.Join(tools.names, ", "))
	}
	if req.GetMode() == actionv1.ExecutionMode_EXECUTION_MODE_HTTP && reg.def.GetServer() == BuiltinServer {
		return nil, nil, stageerr.Invalid("tool %s runs only in direct mode", name)
	}
	if err := s.checkGrant(ctx, req); err != nil {
		return nil, nil, err
	}
	args := req.GetArguments().AsMap()
	if err := reg.schema.Validate(args); err != nil {
		return nil, nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS,
			"invalid arguments for tool %s: %s", name, schema.Message(err))
	}
	return reg, args, nil
}

// checkGrant refuses a call of a tool that requires approval unless it carries an approval
// grant, signed by the orchestrator, for exactly this call, the user it acts for (actingUser)
// and the approver its approval names: before the tool runs, and before a cached result of such
// a tool is returned. The approved flag of a request is never trusted on its own.
func (s *Service) checkGrant(ctx context.Context, req *actionv1.ExecuteRequest) error {
	reg, ok := s.registry().lookup(req.GetToolName())
	if !ok || !reg.def.GetRequiresApproval() {
		return nil
	}
	if s.grants == nil {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
			"tool %s requires approval, and this action stage has no key to verify approval grants (approvals.verify_key)", req.GetToolName())
	}
	err := s.grants.Verify(req.GetApproval().GetGrant(), grant.Call{
		RunID: req.GetRunId(), CallID: req.GetCallId(), Tool: req.GetToolName(),
		Arguments: req.GetArguments(), Approver: req.GetApproval().GetApprover(),
		User: actingUser(ctx, req),
	}, s.now())
	if err != nil {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED, "tool %s requires approval: %v", req.GetToolName(), err)
	}
	return nil
}

// actingUser is the user a request acts for: the one its metadata names (auth.IncomingUser),
// which the orchestrator sets, else its user_id.
func actingUser(ctx context.Context, req *actionv1.ExecuteRequest) string {
	if p, ok, err := auth.IncomingUser(ctx); ok && err == nil {
		return p.ID()
	}
	return req.GetUserId()
}

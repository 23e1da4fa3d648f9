package action

import (
	"context"
	"fmt"
	"strings"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"google.golang.org/protobuf/proto"
)

// Request limits.
const (
	maxIDLength = 512
	maxTimeout  = 24 * time.Hour
)

// Execute runs one tool call, or returns the cached result of an earlier call with the same
// (run_id, call_id) without executing the tool again.
func (s *Service) Execute(ctx context.Context, req *actionv1.ExecuteRequest) (*actionv1.ExecuteResponse, error) {
	ctx, span := s.startSpan(ctx, req)
	defer span.End()
	resp, err := s.execute(ctx, req)
	endSpan(span, resp, err)
	return resp, err
}

func (s *Service) execute(ctx context.Context, req *actionv1.ExecuteRequest) (*actionv1.ExecuteResponse, error) {
	if err := validateRequest(req); err != nil {
		return nil, err
	}
	key := callKey{runID: req.GetRunId(), callID: req.GetCallId()}
	if out, ok := s.cache.get(key); ok {
		return cachedResponse(out, key, req.GetToolName())
	}
	reg, args, err := s.admit(req)
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout == 0 {
		timeout = s.defaultTimeout
	}
	call := Call{UserID: req.GetUserId(), RunID: key.runID, CallID: key.callID, Arguments: args}
	out, executed, err := s.executeOnce(ctx, key, reg, call, timeout)
	if err != nil {
		return nil, err
	}
	if !executed {
		return cachedResponse(out, key, req.GetToolName())
	}
	return out.resp, nil
}

// validateRequest checks the request's own fields.
func validateRequest(req *actionv1.ExecuteRequest) error {
	for _, f := range []struct{ name, value string }{
		{"run_id", req.GetRunId()},
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
	if ms := req.GetTimeoutMs(); ms < 0 || ms > maxTimeout.Milliseconds() {
		return stageerr.Invalid("timeout_ms must be between 0 (the default) and %d, got %d", maxTimeout.Milliseconds(), ms)
	}
	if _, ok := actionv1.ExecutionMode_name[int32(req.GetMode())]; !ok {
		return stageerr.Invalid("unknown execution mode %d", req.GetMode())
	}
	return nil
}

// cachedResponse returns a cached outcome for a request naming tool, which must be the tool
// the call id ran.
func cachedResponse(out outcome, key callKey, tool string) (*actionv1.ExecuteResponse, error) {
	if out.tool != tool {
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_FAILED_PRECONDITION,
			"call id reused for another tool: call %q of run %q already ran %q, not %q", key.callID, key.runID, out.tool, tool)
	}
	resp := proto.CloneOf(out.resp)
	resp.Cached = true
	return resp, nil
}

// admit checks, in order, that the tool exists, runs in the requested mode, is approved when
// it must be and gets arguments that match its schema; it returns the tool and the arguments.
func (s *Service) admit(req *actionv1.ExecuteRequest) (*registered, map[string]any, error) {
	name := req.GetToolName()
	reg, ok := s.tools.lookup(name)
	if !ok {
		return nil, nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_TOOL_NOT_FOUND,
			"unknown tool %q; available tools: %s", name, strings.Join(s.tools.names, ", "))
	}
	if req.GetMode() == actionv1.ExecutionMode_EXECUTION_MODE_HTTP && reg.def.GetServer() == BuiltinServer {
		return nil, nil, stageerr.Invalid("tool %s runs only in direct mode", name)
	}
	if reg.def.GetRequiresApproval() && !req.GetApproval().GetApproved() {
		return nil, nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
			"tool %s requires approval", name)
	}
	args := req.GetArguments().AsMap()
	if err := reg.schema.Validate(args); err != nil {
		return nil, nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_ARGUMENTS,
			"invalid arguments for tool %s: %s", name, validationMessage(err))
	}
	return reg, args, nil
}

// executeOnce runs the call unless a concurrent request for the same key already is, in which
// case it waits for that execution; executed reports whether this request ran the tool. Once
// the tool runs, the execution finishes and is cached even when ctx is cancelled first; a
// call cancelled while it waits in its queue never runs and is not cached.
func (s *Service) executeOnce(ctx context.Context, key callKey, reg *registered, call Call, timeout time.Duration) (out outcome, executed bool, err error) {
	ran := false
	flightKey := fmt.Sprintf("%d:%s%s", len(key.runID), key.runID, key.callID)
	for {
		ch := s.flight.DoChan(flightKey, func() (any, error) {
			if out, ok := s.cache.get(key); ok { // finished between our lookup and this flight
				return out, nil
			}
			resp, err := s.run(ctx, reg, call, timeout)
			if err != nil { // cancelled before running: nothing to cache
				return nil, err
			}
			ran = true
			out := outcome{tool: reg.def.GetName(), resp: resp}
			s.cache.add(key, out)
			return out, nil
		})
		select {
		case r := <-ch:
			if r.Err == nil {
				return r.Val.(outcome), ran, nil
			}
			if ctx.Err() != nil {
				return outcome{}, false, r.Err
			}
			// The flight was another request's, cancelled while queued: run ours.
		case <-ctx.Done():
			return outcome{}, false, ctx.Err()
		}
	}
}

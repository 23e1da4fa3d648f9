package action

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// maxRetries is how often a transient failure is retried (RAG contract §8).
const maxRetries = 3

// attemptResult is what a tool's attempts ended with.
type attemptResult struct {
	text string
	err  error
}

// run executes the call within timeout and reports success, error or timeout. The call first
// waits for a slot on its tool's queue; the wait counts toward the timeout and ends when the
// request is cancelled, in which case nothing ran and run returns the request's error. With
// the slot, run calls claim; when claim fails, the tool does not run and run returns claim's
// error. Once running, the tool's context is detached from the request's cancellation, so a
// client that goes away does not turn a call with side effects into an unrecorded one, and
// cancelled when the timeout fires; run then returns at once, without waiting for a tool that
// ignores cancellation (its queue slot is freed when it does return). The response counts the
// tool's attempts and carries the accounting entries it added by then (Call.Accounting).
func (s *Service) run(ctx context.Context, reg *registered, call Call, timeout time.Duration, claim func() error) (*actionv1.ExecuteResponse, error) {
	start := s.now()
	deadline := time.Now().Add(timeout)
	tctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()

	// The wait ends with the timeout (tctx) or the request's cancellation (ctx).
	wait, stopWaiting := context.WithCancel(tctx)
	stopPropagating := context.AfterFunc(ctx, stopWaiting)
	release, err := s.queues.Acquire(wait, reg.def.GetQueue())
	stopPropagating()
	stopWaiting()
	if err != nil {
		if tctx.Err() == nil {
			return nil, fmt.Errorf("cancelled while waiting in queue %q: %w", reg.def.GetQueue(), context.Cause(ctx))
		}
		return s.response(reg, start, attemptResult{err: err}, true, 0), nil
	}
	if err := claim(); err != nil {
		release()
		return nil, err
	}
	ran := time.Now()

	var attempts atomic.Int32
	spent := &Accounting{}
	call.Accounting = spent
	done := make(chan attemptResult, 1)
	go func() {
		defer release()
		text, err := s.callWithRetries(tctx, reg, call, &attempts)
		done <- attemptResult{text: text, err: err}
	}()
	var res attemptResult
	select {
	case res = <-done:
	case <-tctx.Done():
		select {
		case res = <-done: // finished at the same moment: keep its answer
		default:
			res = attemptResult{err: tctx.Err()}
		}
	}
	resp := s.response(reg, start, res, tctx.Err() != nil, attempts.Load())
	resp.Accounting = spent.list()
	s.metrics.executed(ctx, reg.def.GetName(), resp.GetStatus(), ran)
	return resp, nil
}

// response reports how a call ended: a timeout when timedOut and the tool gave no answer.
// A result or error that is not UTF-8 (a REST tool's binary or Latin-1 answer) has each run of
// bad bytes replaced by U+FFFD: the response and the call ledger's record hold it in protobuf
// strings, which must be UTF-8, and a tool that ran would otherwise lose its result.
func (s *Service) response(reg *registered, start time.Time, res attemptResult, timedOut bool, attempts int32) *actionv1.ExecuteResponse {
	resp := &actionv1.ExecuteResponse{Server: reg.def.GetServer(), Attempts: attempts}
	switch {
	case res.err == nil:
		resp.Status = typev1.ToolStatus_TOOL_STATUS_SUCCESS
		resp.Result = strings.ToValidUTF8(res.text, "\uFFFD")
	case timedOut:
		resp.Status = typev1.ToolStatus_TOOL_STATUS_TIMEOUT
		resp.Error = "timeout"
		resp.ErrorCode = typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_TIMEOUT
	default:
		resp.Status = typev1.ToolStatus_TOOL_STATUS_ERROR
		resp.Error = strings.ToValidUTF8(res.err.Error(), "\uFFFD")
		resp.ErrorCode = typev1.StageErrorCode_STAGE_ERROR_CODE_EXECUTION_ERROR
	}
	resp.ExecutionTimeMs = s.now().Sub(start).Milliseconds()
	return resp
}

// callWithRetries calls the tool, retrying failures that wrap ErrTransient up to maxRetries
// times with exponential backoff and jitter, as long as the next attempt fits in ctx's
// deadline; a failure that wraps ErrMayHaveRun too is retried only when the tool is
// idempotent, so that a tool is never run twice when it may have run. A backend that asked to
// be tried again no sooner than some time (a REST Retry-After) is waited for that long at
// least, and not retried when that does not fit the deadline. Retries are attempts of the
// same call, counted in attempts as soon as they start (one still running when the timeout
// fires counts), unless they fail with ErrNotSent.
func (s *Service) callWithRetries(ctx context.Context, reg *registered, call Call, attempts *atomic.Int32) (string, error) {
	for retry := 0; ; retry++ {
		attempts.Add(1)
		text, err := s.callTool(ctx, reg, call)
		if errors.Is(err, ErrNotSent) {
			attempts.Add(-1) // the backend received nothing
		}
		if err == nil || !errors.Is(err, ErrTransient) || retry == maxRetries ||
			errors.Is(err, ErrMayHaveRun) && !reg.def.GetIdempotent() {
			return text, err
		}
		delay := max(backoff(s.retryBase, retry), retryAfter(err))
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
			return text, err
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return "", ctx.Err()
		case <-timer.C:
		}
	}
}

// backoff is the delay before retry n (0-based): base·2ⁿ, jittered to between half and all
// of it.
func backoff(base time.Duration, n int) time.Duration {
	d := base << n
	return d/2 + rand.N(d/2+1)
}

// callTool makes one attempt; a panicking tool is an execution error, logged.
func (s *Service) callTool(ctx context.Context, reg *registered, call Call) (text string, err error) {
	name := reg.def.GetName()
	defer func() {
		if r := recover(); r != nil {
			s.log.ErrorContext(ctx, "tool panicked", "tool", name, "run_id", call.RunID, "call_id", call.CallID, "panic", r)
			text, err = "", fmt.Errorf("tool %s failed unexpectedly", name)
		}
	}()
	return reg.tool.Call(ctx, call)
}
